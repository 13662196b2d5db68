// Package env reads a binary's configuration struct from the environment
// with kelseyhightower/envconfig, through a getenv function rather than the
// process environment, so that tests and in-process instances can run a
// binary with a configuration of their own (Ryer's run(getenv)).
//
// Fields are named by their `envconfig` tags (embedded structs are
// flattened, as envconfig does with an empty prefix) and carry `default`
// and `desc` tags.
package env

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/kelseyhightower/envconfig"
)

// Var is one variable of a configuration struct.
type Var struct {
	// Name is the environment variable, e.g. "NATS_URL".
	Name string
	// Default is the value used when the variable is unset or empty.
	Default string
	// Desc says what it means.
	Desc string

	field reflect.Value
}

// Vars lists the variables of spec, a pointer to a configuration struct, in
// field order.
func Vars(spec any) []Var {
	return vars(reflect.ValueOf(spec).Elem())
}

func vars(v reflect.Value) []Var {
	var out []Var
	for i := 0; i < v.NumField(); i++ {
		f, sf := v.Field(i), v.Type().Field(i)
		if sf.Anonymous && f.Kind() == reflect.Struct {
			out = append(out, vars(f)...)
			continue
		}
		name := sf.Tag.Get("envconfig")
		if name == "" || !sf.IsExported() {
			continue
		}
		out = append(out, Var{Name: name, Default: sf.Tag.Get("default"), Desc: sf.Tag.Get("desc"), field: f})
	}
	return out
}

// decodePrefix names the variables of the struct envconfig decodes. Nothing
// sets them, so envconfig applies the `default` tags, which carry the values
// read through getenv.
const decodePrefix = "CRAWLHOUSE_ENV_DECODE_"

// Load sets the fields of spec (a pointer to a configuration struct) from
// getenv, applying defaults. The strings are decoded by envconfig itself
// (durations, booleans, numbers, comma-separated lists): Load builds a
// struct of the same field types whose `default` tags hold the values and
// lets envconfig.Process fill it. An error names the variable but never
// repeats its value, which may be a secret.
func Load(getenv func(string) string, spec any) error {
	vs := Vars(spec)
	fields := make([]reflect.StructField, len(vs))
	for i, v := range vs {
		val := getenv(v.Name)
		if val == "" {
			val = v.Default
		}
		tag := fmt.Sprintf(`envconfig:"%s%d"`, decodePrefix, i)
		if val != "" {
			tag += " default:" + strconv.Quote(val)
		}
		fields[i] = reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: v.field.Type(), Tag: reflect.StructTag(tag)}
	}
	decoded := reflect.New(reflect.StructOf(fields))
	if err := envconfig.Process("", decoded.Interface()); err != nil {
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			var i int
			fmt.Sscanf(pe.FieldName, "F%d", &i)
			return fmt.Errorf("%s: %s", vs[i].Name, notA(pe.TypeName))
		}
		return err
	}
	for i, v := range vs {
		v.field.Set(decoded.Elem().Field(i))
	}
	return nil
}

func notA(typ string) string {
	switch typ {
	case "time.Duration":
		return "not a duration like 5s or 30m"
	case "bool":
		return "not true or false"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "not an integer"
	}
	return "not a valid " + typ
}

// WriteTable writes spec's variables as an aligned VARIABLE DEFAULT MEANING
// table, for --help.
func WriteTable(w io.Writer, spec any) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  VARIABLE\tDEFAULT\tMEANING")
	for _, v := range Vars(spec) {
		def := v.Default
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", v.Name, def, v.Desc)
	}
	return tw.Flush()
}

// OneLine is a Validate error on one line for stderr and the log: the
// lines errors.Join puts each problem on, joined with "; ".
func OneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// Checked loads a binary's configuration with load and validates it, so
// that every binary starts with the same two steps and the same errors:
// "config: " and what could not be read, or every problem Validate found on
// one line.
func Checked[C interface{ Validate() error }](load func(getenv func(string) string) (C, error), getenv func(string) string) (C, error) {
	cfg, err := load(getenv)
	if err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("config: %s", OneLine(err))
	}
	return cfg, nil
}
