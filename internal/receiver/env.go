package receiver

import (
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// envVar is one field of Config as the environment sees it.
type envVar struct {
	name, def, desc string
	field           reflect.Value
}

// envVars walks v (a pointer to a struct) like envconfig does with an empty
// prefix: every field with an envconfig tag, embedded structs flattened.
func envVars(v reflect.Value) []envVar {
	v = v.Elem()
	var out []envVar
	for i := 0; i < v.NumField(); i++ {
		f, sf := v.Field(i), v.Type().Field(i)
		if sf.Anonymous && f.Kind() == reflect.Struct {
			out = append(out, envVars(f.Addr())...)
			continue
		}
		name := sf.Tag.Get("envconfig")
		if name == "" || !sf.IsExported() {
			continue
		}
		out = append(out, envVar{name: name, def: sf.Tag.Get("default"), desc: sf.Tag.Get("desc"), field: f})
	}
	return out
}

// Load reads a Config through getenv, applying the envconfig defaults. It
// does what envconfig.Process("", &cfg) does, but envconfig reads only the
// process environment, and tests (and in-process receivers) need their own.
// It does not validate: see Config.Validate.
func Load(getenv func(string) string) (Config, error) {
	var c Config
	for _, ev := range envVars(reflect.ValueOf(&c)) {
		s := getenv(ev.name)
		if s == "" {
			s = ev.def
		}
		if s == "" {
			continue
		}
		if err := setField(ev.field, s); err != nil {
			// The value itself is left out: it may be a secret.
			return c, fmt.Errorf("%s: %w", ev.name, err)
		}
	}
	return c, nil
}

func setField(f reflect.Value, s string) error {
	switch {
	case f.Type() == reflect.TypeOf(time.Duration(0)):
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("not a duration like 5s or 30m")
		}
		f.SetInt(int64(d))
	case f.Kind() == reflect.String:
		f.SetString(s)
	case f.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("not true or false")
		}
		f.SetBool(b)
	case f.Kind() == reflect.Int, f.Kind() == reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		f.SetInt(n)
	case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
		f.Set(reflect.ValueOf(strings.Split(s, ",")))
	default:
		return fmt.Errorf("unsupported type %s", f.Type())
	}
	return nil
}

// usage writes the --help text: what the receiver does and every variable
// with its default.
func usage(w io.Writer) {
	fmt.Fprint(w, `receiver: takes signed crawl.page webhook deliveries and stores them in JetStream.

Usage: receiver [--help | --version]
       receiver probe URL    exit 0 if GET URL answers 2xx within 2s, else 1 (container healthcheck)

Configured by the environment:

`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  VARIABLE\tDEFAULT\tMEANING")
	var c Config
	for _, ev := range envVars(reflect.ValueOf(&c)) {
		def := ev.def
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", ev.name, def, ev.desc)
	}
	tw.Flush()
	fmt.Fprint(w, `
Endpoints: POST $WEBHOOK_PATH, GET /healthz, GET /readyz, GET /metrics.
`)
}
