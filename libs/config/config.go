// Package config loads a process's typed configuration from environment variables.
//
// A config is a struct whose fields carry `env:"NAME"` tags, with optional
// `default:"…"`, `required:"true"`, `secret:"true"` and `help:"…"`. Embedded structs
// are walked, so the common settings every process shares are declared once.
// Describe lists the variables, which lets the README and the docker-compose test
// check that every variable the code reads is documented and wired.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Var describes one environment variable a config reads.
type Var struct {
	Name     string
	Default  string
	Help     string
	Secret   bool
	Required bool
}

// ByteSize is a size in bytes that parses "1MiB", "256MiB", "1GiB", "512KiB" or a plain number.
type ByteSize int64

// Common holds the settings every process reads.
type Common struct {
	LogLevel        string        `env:"LOG_LEVEL" default:"info" help:"debug, info, warn or error"`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" default:"15s" help:"how long graceful shutdown waits for in-flight requests"`
	OTLPEndpoint    string        `env:"OTEL_EXPORTER_OTLP_ENDPOINT" help:"OTLP/HTTP endpoint for traces; unset means spans are not exported"`
	ServiceName     string        `env:"OTEL_SERVICE_NAME" help:"service name on spans; defaults to the binary's name"`
}

// Load fills dst (a pointer to a struct) from the environment.
func Load(dst any) error { return LoadFrom(os.LookupEnv, dst) }

// LoadFrom is Load with an injectable lookup, for tests.
func LoadFrom(lookup func(string) (string, bool), dst any) error {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("config: Load needs a pointer to a struct, got %T", dst)
	}
	var errs []string
	walk(v.Elem(), func(f reflect.Value, sf reflect.StructField) {
		name := sf.Tag.Get("env")
		raw, ok := lookup(name)
		if !ok || raw == "" {
			if sf.Tag.Get("required") == "true" {
				errs = append(errs, name+" is required")
				return
			}
			raw, ok = sf.Tag.Lookup("default")
			if !ok {
				return
			}
		}
		if err := set(f, raw); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", name, err))
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("config: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Describe lists the variables cfg (a struct or pointer to one) reads, in field order.
func Describe(cfg any) []Var {
	v := reflect.ValueOf(cfg)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	var out []Var
	walk(v, func(_ reflect.Value, sf reflect.StructField) {
		out = append(out, Var{
			Name:     sf.Tag.Get("env"),
			Default:  sf.Tag.Get("default"),
			Help:     sf.Tag.Get("help"),
			Secret:   sf.Tag.Get("secret") == "true",
			Required: sf.Tag.Get("required") == "true",
		})
	})
	return out
}

// LogValue renders cfg for a start-up log line, secrets masked.
func LogValue(cfg any) slog.Value {
	v := reflect.ValueOf(cfg)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	var attrs []slog.Attr
	walk(v, func(f reflect.Value, sf reflect.StructField) {
		name := sf.Tag.Get("env")
		if sf.Tag.Get("secret") == "true" {
			if f.IsZero() {
				attrs = append(attrs, slog.String(name, ""))
			} else {
				attrs = append(attrs, slog.String(name, "***"))
			}
			return
		}
		attrs = append(attrs, slog.Any(name, fmt.Sprint(f.Interface())))
	})
	return slog.GroupValue(attrs...)
}

func walk(v reflect.Value, fn func(reflect.Value, reflect.StructField)) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		f := v.Field(i)
		if sf.Anonymous && sf.Type.Kind() == reflect.Struct {
			walk(f, fn)
			continue
		}
		if sf.Tag.Get("env") == "" || !sf.IsExported() {
			continue
		}
		fn(f, sf)
	}
}

var byteSizeType = reflect.TypeOf(ByteSize(0))

func set(f reflect.Value, raw string) error {
	raw = strings.TrimSpace(raw)
	switch {
	case f.Type() == byteSizeType:
		n, err := ParseByteSize(raw)
		if err != nil {
			return err
		}
		f.SetInt(int64(n))
	case f.Type() == reflect.TypeOf(time.Duration(0)):
		d, err := time.ParseDuration(raw)
		if err != nil {
			return fmt.Errorf("not a duration (like 30s or 5m): %q", raw)
		}
		f.SetInt(int64(d))
	case f.Kind() == reflect.String:
		f.SetString(raw)
	case f.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("not a boolean: %q", raw)
		}
		f.SetBool(b)
	case f.Kind() >= reflect.Int && f.Kind() <= reflect.Int64:
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer: %q", raw)
		}
		f.SetInt(n)
	case f.Kind() == reflect.Float64:
		x, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return fmt.Errorf("not a number: %q", raw)
		}
		f.SetFloat(x)
	case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
		var parts []string
		for _, p := range strings.Split(raw, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		f.Set(reflect.ValueOf(parts))
	default:
		return fmt.Errorf("unsupported field type %s", f.Type())
	}
	return nil
}

// ParseByteSize parses sizes such as "1MiB", "256MiB", "64KiB", "1GiB" or "1048576". A
// size that does not fit in an int64 number of bytes is refused, never wrapped.
func ParseByteSize(s string) (ByteSize, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	num, mult := s, int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(num, "-") || err == nil && n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size too large: %q (at most %d bytes)", s, int64(math.MaxInt64))
	}
	if err != nil || n < 0 {
		return 0, fmt.Errorf("not a size (like 1MiB): %q", s)
	}
	return ByteSize(n * mult), nil
}

// OrDefaults returns l with every numeric field (a count, a size, a duration) that is zero
// or less set to the same field of d: how a service's Limits take their defaults, in one
// place, whatever the fields are. Other fields, and unexported ones, are left as they are.
func OrDefaults[T any](l, d T) T {
	lv, dv := reflect.ValueOf(&l).Elem(), reflect.ValueOf(d)
	for i := range lv.NumField() {
		f := lv.Field(i)
		if !f.CanSet() {
			continue
		}
		switch f.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if f.Int() <= 0 {
				f.SetInt(dv.Field(i).Int())
			}
		case reflect.Float32, reflect.Float64:
			if f.Float() <= 0 {
				f.SetFloat(dv.Field(i).Float())
			}
		}
	}
	return l
}
