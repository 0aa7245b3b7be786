package sealbox_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/analyticsco/platform/libs/sealbox"
)

func newKey(t testing.TB) (string, []byte) {
	t.Helper()
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	return base64.StdEncoding.EncodeToString(raw), raw
}

func mustParse(t testing.TB, list string) *sealbox.Box {
	t.Helper()
	b, err := sealbox.Parse("TEST_KEY", list)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRotation(t *testing.T) {
	oldKey, _ := newKey(t)
	newK, _ := newKey(t)
	ad := []byte("42")
	sealedOld := mustParse(t, oldKey).Seal([]byte("secret"), ad)

	// Step 1: the new key is listed second; the old one still seals, both open.
	step1 := mustParse(t, oldKey+","+newK)
	if got, err := step1.Open(sealedOld, ad); err != nil || string(got) != "secret" {
		t.Fatalf("step 1 open: %q %v", got, err)
	}
	// Step 2: the new key first. Old values open and are not current; Reseal moves them.
	step2 := mustParse(t, newK+", "+oldKey)
	if step1.PrimaryID() == step2.PrimaryID() {
		t.Fatal("the primary id did not change with the first key")
	}
	if cur, err := step2.Current(sealedOld, ad); err != nil || cur {
		t.Fatalf("old value current under the new key: %v %v", cur, err)
	}
	resealed, changed, err := step2.Reseal(sealedOld, ad)
	if err != nil || !changed || bytes.Equal(resealed, sealedOld) {
		t.Fatalf("reseal: changed=%v err=%v", changed, err)
	}
	if again, changed, _ := step2.Reseal(resealed, ad); changed || !bytes.Equal(again, resealed) {
		t.Fatal("a current value was resealed again")
	}
	// Step 3: the old key removed; what was resealed opens, what was not does not.
	step3 := mustParse(t, newK)
	if got, err := step3.Open(resealed, ad); err != nil || string(got) != "secret" {
		t.Fatalf("step 3 open: %q %v", got, err)
	}
	if _, err := step3.Open(sealedOld, ad); !errors.Is(err, sealbox.ErrOpen) {
		t.Fatalf("a value under a removed key opened: %v", err)
	}
	// A replica still on step 1 opens values sealed at step 2 (step 1 lists the new key).
	if got, err := step1.Open(step2.Seal([]byte("x"), ad), ad); err != nil || string(got) != "x" {
		t.Fatalf("step 1 replica opens a step 2 value: %q %v", got, err)
	}
}

func TestAssociatedDataAndTampering(t *testing.T) {
	k, _ := newKey(t)
	b := mustParse(t, k)
	sealed := b.Seal([]byte("secret"), []byte("1"))
	if _, err := b.Open(sealed, []byte("2")); !errors.Is(err, sealbox.ErrOpen) {
		t.Fatalf("opened with other associated data: %v", err)
	}
	for i := range sealed {
		c := bytes.Clone(sealed)
		c[i] ^= 0x40
		if _, err := b.Open(c, []byte("1")); err == nil {
			t.Fatalf("byte %d flipped and it still opened", i)
		}
	}
	if _, err := b.Open(nil, nil); !errors.Is(err, sealbox.ErrOpen) {
		t.Fatalf("empty value: %v", err)
	}
}

// Values sealed before key ids (nonce | ciphertext) open with any listed key and are
// never current, so the owner re-seals them.
func TestLegacyValues(t *testing.T) {
	k, raw := newKey(t)
	other, _ := newKey(t)
	block, _ := aes.NewCipher(raw)
	aead, _ := cipher.NewGCM(block)
	nonce := make([]byte, 12)
	_, _ = rand.Read(nonce)
	legacy := aead.Seal(bytes.Clone(nonce), nonce, []byte("old"), []byte("7"))
	for _, list := range []string{k, other + "," + k} {
		b := mustParse(t, list)
		if got, err := b.Open(legacy, []byte("7")); err != nil || string(got) != "old" {
			t.Fatalf("%d keys: legacy open %q %v", strings.Count(list, ",")+1, got, err)
		}
		if cur, _ := b.Current(legacy, []byte("7")); cur {
			t.Fatal("a legacy value is current")
		}
	}
	b := mustParse(t, k)
	if out, changed, err := b.Reseal(legacy, []byte("7")); err != nil || !changed {
		t.Fatalf("legacy reseal: %v %v", changed, err)
	} else if cur, _ := b.Current(out, []byte("7")); !cur {
		t.Fatal("resealed legacy value is not current")
	}
}

func TestParseNamesTheSettingAndTheKey(t *testing.T) {
	k, _ := newKey(t)
	for list, want := range map[string]string{
		"":            "TEST_KEY: no key",
		" , ":         "TEST_KEY: no key",
		"not base64!": "TEST_KEY: key 1 must be 32 bytes",
		k + "," + base64.StdEncoding.EncodeToString([]byte("short")): "TEST_KEY: key 2 must be 32 bytes",
		k + "," + k: "TEST_KEY: key 2 is listed twice",
	} {
		if _, err := sealbox.Parse("TEST_KEY", list); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", list, err, want)
		}
		if _, err := sealbox.Parse("TEST_KEY", list); err != nil && strings.Contains(err.Error(), k) {
			t.Errorf("the error quotes a key: %v", err)
		}
	}
	var many []string
	for i := 0; i <= sealbox.MaxKeys; i++ {
		s, _ := newKey(t)
		many = append(many, s)
	}
	if _, err := sealbox.Parse("TEST_KEY", strings.Join(many, ",")); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("too many keys: %v", err)
	}
}

func FuzzOpen(f *testing.F) {
	k, _ := newKey(f)
	b := mustParse(f, k)
	f.Add(b.Seal([]byte("secret"), []byte("1")), []byte("1"))
	f.Add([]byte("S\x01"), []byte(""))
	f.Fuzz(func(t *testing.T, sealed, ad []byte) {
		plain, err := b.Open(sealed, ad)
		if err == nil {
			// Anything that opens re-seals to something that opens to the same bytes.
			if got, err := b.Open(b.Seal(plain, ad), ad); err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("round trip: %v", err)
			}
		}
	})
}
