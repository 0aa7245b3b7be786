// Package jcs is the JSON Canonicalization Scheme of RFC 8785: the one byte form of a
// JSON value that a hash is taken of. Object members are sorted by their names' UTF-16
// code units, strings are escaped as ECMAScript's JSON.stringify escapes them (only '"',
// '\\' and the control characters), numbers are written as ECMAScript writes a double
// (the shortest form that reads back the same value), and there is no whitespace.
package jcs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrNotCanonicalizable is JSON that has no canonical form: invalid JSON, a number that
// is not a finite double, a string that is not valid UTF-8, or trailing data.
var ErrNotCanonicalizable = errors.New("jcs: not canonicalizable")

// Transform returns the canonical form of the JSON text in.
func Transform(in []byte) ([]byte, error) {
	if !utf8.Valid(in) {
		return nil, fmt.Errorf("%w: text that is not valid UTF-8", ErrNotCanonicalizable)
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("%w: data after the value", ErrNotCanonicalizable)
	}
	var b bytes.Buffer
	if err := write(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Marshal is the canonical form of v as encoding/json encodes it.
func Marshal(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
	}
	return Transform(raw)
}

func write(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("%w: the number %s is not a finite double", ErrNotCanonicalizable, x)
		}
		b.WriteString(Number(f))
	case string:
		return writeString(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := write(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		names := make([]string, 0, len(x))
		for k := range x {
			names = append(names, k)
		}
		slices.SortFunc(names, compareUTF16)
		b.WriteByte('{')
		for i, k := range names {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeString(b, k); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := write(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("%w: a %T", ErrNotCanonicalizable, v)
	}
	return nil
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785 sorts names.
func compareUTF16(a, b string) int {
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	return slices.Compare(ua, ub)
}

const hexDigits = "0123456789abcdef"

func writeString(b *bytes.Buffer, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: a string that is not valid UTF-8", ErrNotCanonicalizable)
	}
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hexDigits[r>>4])
				b.WriteByte(hexDigits[r&0xf])
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return nil
}

// Number writes a finite double as ECMAScript's Number.prototype.toString does (ECMA-262
// 7.1.12.1): the shortest digits that read back the same value, in plain notation when
// the decimal exponent is within [-6, 21), in exponent notation otherwise; -0 is "0".
func Number(f float64) string {
	if f == 0 {
		return "0"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	// The shortest digits d1.d2...dk and the exponent e: f = 0.d1...dk × 10^n, n = e+1.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	n, k := x+1, len(digits)
	var out string
	switch {
	case k <= n && n <= 21:
		out = digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		out = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		out = "0." + strings.Repeat("0", -n) + digits
	default:
		out = digits[:1]
		if k > 1 {
			out += "." + digits[1:]
		}
		s := "+"
		if n-1 < 0 {
			s = "-"
		}
		out += "e" + s + strconv.Itoa(abs(n-1))
	}
	return sign + out
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}
