package config_test

import (
	"bufio"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/readercmd"
	"github.com/crawlhouse/crawlhouse/internal/receivercmd"
	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
)

// TestEnvironmentReference keeps config/environment.md, the operators'
// reference, equal to what the binaries really read: for each binary the
// same variable names and the same defaults as its envconfig struct. The
// deploy tests (compose, chart, example env files) trust this file, so the
// whole chain is checked from the structs outward.
func TestEnvironmentReference(t *testing.T) {
	t.Parallel()
	doc := readReference(t, "environment.md")
	for _, tc := range []struct {
		section string
		config  any
	}{
		{"receiver", receivercmd.Config{}},
		{"sink", sinkcmd.Config{}},
		{"reader", readercmd.Config{}},
	} {
		t.Run(tc.section, func(t *testing.T) {
			t.Parallel()
			documented, ok := doc[tc.section]
			if !ok {
				t.Fatalf("environment.md has no \"## %s\" section", tc.section)
			}
			vars := envVars(t, reflect.TypeOf(tc.config), "")
			for name, v := range vars {
				d, ok := documented[name]
				if !ok {
					t.Errorf("%s reads %s (field %s) but environment.md does not document it", tc.section, name, v.field)
					continue
				}
				want, err := normalize(v.typ, v.def)
				if err != nil {
					t.Errorf("%s: default tag %q of %s: %v", name, v.def, v.field, err)
					continue
				}
				got, err := normalize(v.typ, d)
				if err != nil {
					t.Errorf("%s: documented default %q does not parse as %s: %v", name, d, v.typ, err)
					continue
				}
				if got != want {
					t.Errorf("%s: documented default %q, struct default %q", name, d, v.def)
				}
			}
			for name := range documented {
				if _, ok := vars[name]; !ok {
					t.Errorf("environment.md documents %s under %s, but %T does not read it", name, tc.section, tc.config)
				}
			}
		})
	}
}

// TestExampleEnvFiles checks that the example env files set only variables
// that some binary reads, so a typo does not silently fall back to a default.
func TestExampleEnvFiles(t *testing.T) {
	t.Parallel()
	doc := readReference(t, "environment.md")
	known := map[string]bool{}
	for _, vars := range doc {
		for name := range vars {
			known[name] = true
		}
	}
	for _, file := range []string{"local.env", "production.env", "../.env.example"} {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			name, _, ok := strings.Cut(line, "=")
			if !ok {
				t.Errorf("%s:%d: not NAME=value: %q", file, n, line)
				continue
			}
			// .env.example also holds values that only docker-compose.yml
			// interpolates (image tags, ports); the deploy tests check those.
			if file == "../.env.example" {
				continue
			}
			if !known[name] {
				t.Errorf("%s:%d: %s is read by no binary (see environment.md)", file, n, name)
			}
		}
		f.Close()
	}
}

// readReference parses environment.md into section → variable → default,
// with "" for a default written as "—".
func readReference(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]map[string]string{}
	var section map[string]string
	for n, line := range strings.Split(string(data), "\n") {
		if name, ok := strings.CutPrefix(line, "## "); ok {
			section = map[string]string{}
			doc[strings.TrimSpace(name)] = section
			continue
		}
		if section == nil || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) < 3 {
			t.Fatalf("environment.md:%d: a row needs | Variable | Default | Meaning |", n+1)
		}
		name := strings.TrimSpace(cells[0])
		if name == "Variable" || strings.HasPrefix(name, "---") {
			continue
		}
		if !regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`).MatchString(name) {
			t.Fatalf("environment.md:%d: %q is not a variable name", n+1, name)
		}
		if _, dup := section[name]; dup {
			t.Fatalf("environment.md:%d: %s listed twice in one section", n+1, name)
		}
		def := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if def == "—" || def == "-" {
			def = ""
		}
		section[name] = def
	}
	return doc
}

type envVar struct {
	field string
	typ   reflect.Type
	def   string
}

// envVars walks a config struct the way envconfig.Process("", …) does:
// anonymous embedded structs share the prefix, named struct fields add
// their own, and types that decode themselves are leaves.
func envVars(t *testing.T, typ reflect.Type, prefix string) map[string]envVar {
	t.Helper()
	vars := map[string]envVar{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() || f.Tag.Get("ignored") == "true" {
			continue
		}
		key := f.Tag.Get("envconfig")
		if key == "" {
			key = f.Name
			if f.Tag.Get("split_words") == "true" {
				key = splitWords(f.Name)
			}
		}
		if prefix != "" {
			key = prefix + "_" + key
		}
		key = strings.ToUpper(key)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !decodesItself(ft) {
			inner := key
			if f.Anonymous {
				inner = prefix
			}
			for k, v := range envVars(t, ft, inner) {
				if _, dup := vars[k]; dup {
					t.Errorf("%s is read by two fields", k)
				}
				vars[k] = v
			}
			continue
		}
		if _, dup := vars[key]; dup {
			t.Errorf("%s is read by two fields", key)
		}
		vars[key] = envVar{field: typ.Name() + "." + f.Name, typ: f.Type, def: f.Tag.Get("default")}
	}
	return vars
}

// decodesItself reports the types envconfig hands the raw string to.
func decodesItself(typ reflect.Type) bool {
	p := reflect.PointerTo(typ)
	return slices.ContainsFunc([]string{"Decode", "Set", "UnmarshalText", "UnmarshalBinary"}, func(m string) bool {
		_, ok := p.MethodByName(m)
		return ok
	})
}

// splitWords is envconfig's split_words naming: "MaxInflight" → "MAX_INFLIGHT".
func splitWords(name string) string {
	gather := regexp.MustCompile("([^A-Z]+|[A-Z]+[^A-Z]+|[A-Z]+)")
	acronym := regexp.MustCompile("([A-Z]+)([A-Z][^A-Z]+)")
	var words []string
	for _, w := range gather.FindAllStringSubmatch(name, -1) {
		if m := acronym.FindStringSubmatch(w[0]); len(m) == 3 {
			words = append(words, m[1], m[2])
		} else {
			words = append(words, w[0])
		}
	}
	return strings.Join(words, "_")
}

// normalize turns a default, as written in a tag or in the reference, into
// the canonical text of the value envconfig would set ("" meaning the zero
// value), so that "1s" and "1000ms" or "" and "false" compare equal.
func normalize(typ reflect.Type, s string) (string, error) {
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ == reflect.TypeFor[time.Duration]() {
		if s == "" {
			return "0s", nil
		}
		d, err := time.ParseDuration(s)
		return d.String(), err
	}
	switch typ.Kind() {
	case reflect.Bool:
		if s == "" {
			return "false", nil
		}
		b, err := strconv.ParseBool(s)
		return strconv.FormatBool(b), err
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if s == "" {
			return "0", nil
		}
		n, err := strconv.ParseInt(s, 0, 64)
		return strconv.FormatInt(n, 10), err
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if s == "" {
			return "0", nil
		}
		n, err := strconv.ParseUint(s, 0, 64)
		return strconv.FormatUint(n, 10), err
	case reflect.Float32, reflect.Float64:
		if s == "" {
			return "0", nil
		}
		f, err := strconv.ParseFloat(s, 64)
		return strconv.FormatFloat(f, 'g', -1, 64), err
	case reflect.Slice:
		parts := strings.Split(s, ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		return strings.Join(parts, ","), nil
	default:
		return s, nil
	}
}
