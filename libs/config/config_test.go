package config_test

import (
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/libs/config"
)

type cfg struct {
	config.Common
	Addr   string          `env:"ADDR" default:"127.0.0.1:1"`
	Secret string          `env:"SECRET" required:"true" secret:"true"`
	Limit  config.ByteSize `env:"LIMIT" default:"1MiB"`
	N      int             `env:"N" default:"3"`
	On     bool            `env:"ON"`
	List   []string        `env:"LIST"`
	Wait   time.Duration   `env:"WAIT" default:"2s"`
}

func lookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLoad(t *testing.T) {
	var c cfg
	err := config.LoadFrom(lookup(map[string]string{"SECRET": "x", "LIMIT": "256MiB", "ON": "true", "LIST": "a, b,,c", "LOG_LEVEL": "debug"}), &c)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:1" || c.Limit != 256<<20 || c.N != 3 || !c.On || len(c.List) != 3 || c.Wait != 2*time.Second || c.LogLevel != "debug" || c.ShutdownTimeout != 15*time.Second {
		t.Fatalf("%+v", c)
	}
}

func TestLoadErrorsNameTheVariable(t *testing.T) {
	var c cfg
	err := config.LoadFrom(lookup(map[string]string{"N": "x", "WAIT": "soon"}), &c)
	if err == nil || !strings.Contains(err.Error(), "SECRET is required") || !strings.Contains(err.Error(), "N: not an integer") || !strings.Contains(err.Error(), "WAIT") {
		t.Fatalf("err = %v", err)
	}
}

func TestDescribeAndMaskedLog(t *testing.T) {
	vars := config.Describe(cfg{})
	names := map[string]config.Var{}
	for _, v := range vars {
		names[v.Name] = v
	}
	if !names["SECRET"].Secret || !names["SECRET"].Required || names["LOG_LEVEL"].Default != "info" || names["LIMIT"].Default != "1MiB" {
		t.Fatalf("%+v", vars)
	}
	v := config.LogValue(cfg{Secret: "hunter2"})
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("x", "config", v)
	if strings.Contains(b.String(), "hunter2") || !strings.Contains(b.String(), "SECRET=***") {
		t.Fatalf("secret not masked: %s", b.String())
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]config.ByteSize{"1MiB": 1 << 20, "64KiB": 64 << 10, "1GiB": 1 << 30, "100": 100, "10B": 10} {
		got, err := config.ParseByteSize(in)
		if err != nil || got != want {
			t.Errorf("%s: %d %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1TB", "MiB"} {
		if _, err := config.ParseByteSize(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseByteSizeRefusesSizesThatOverflow(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    config.ByteSize
		tooBig  bool
		refused bool
	}{
		{in: "9223372036854775807", want: math.MaxInt64},
		{in: "9223372036854775807B", want: math.MaxInt64},
		{in: "8589934591GiB", want: 8589934591 << 30},
		{in: "8796093022207MiB", want: 8796093022207 << 20},
		{in: "9007199254740991KiB", want: 9007199254740991 << 10},
		{in: "9223372036854775808", tooBig: true},
		{in: "99999999999999999999B", tooBig: true},
		{in: "8589934592GiB", tooBig: true},
		{in: "9000000000GiB", tooBig: true},
		{in: "8796093022208MiB", tooBig: true},
		{in: "9007199254740992KiB", tooBig: true},
		{in: "-9223372036854775809", refused: true},
		{in: "8EiB", refused: true},
	} {
		got, err := config.ParseByteSize(tc.in)
		switch {
		case tc.tooBig:
			if err == nil || !strings.Contains(err.Error(), "too large") || !strings.Contains(err.Error(), "9223372036854775807 bytes") {
				t.Errorf("%s: got %d, %v; want a too-large error naming the maximum", tc.in, got, err)
			}
		case tc.refused:
			if err == nil || got != 0 {
				t.Errorf("%s: got %d, %v; want refused", tc.in, got, err)
			}
		case err != nil || got != tc.want || got < 0:
			t.Errorf("%s: got %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestLoadRefusesAByteSizeThatOverflows(t *testing.T) {
	type cfg struct {
		Max config.ByteSize `env:"TEST_OVERFLOW_MAX" default:"1MiB"`
	}
	env := map[string]string{"TEST_OVERFLOW_MAX": "9000000000GiB"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	var c cfg
	if err := config.LoadFrom(lookup, &c); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("loaded %d, %v; want a too-large error", c.Max, err)
	}
}

func TestOrDefaultsFillsEveryNumberNotSet(t *testing.T) {
	type limits struct {
		Items   int
		Bytes   int64
		Timeout time.Duration
		Ratio   float64
		Name    string
		hidden  int
	}
	d := limits{Items: 10, Bytes: 1 << 20, Timeout: time.Minute, Ratio: 0.5, Name: "default", hidden: 3}
	got := config.OrDefaults(limits{Items: 3, Bytes: -1, Name: "mine"}, d)
	want := limits{Items: 3, Bytes: 1 << 20, Timeout: time.Minute, Ratio: 0.5, Name: "mine"}
	if got != want {
		t.Fatalf("OrDefaults = %+v, want %+v", got, want)
	}
}
