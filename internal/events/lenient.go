package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
)

// decodeLeniently decodes the JSON object b into the struct *dst as
// encoding/json would (keys matched to the json tags exactly, else
// case-insensitively; the last of repeated keys wins; unknown keys
// ignored), except that a known field whose value does not fit its type is
// left at its zero value instead of failing the whole object. It fails only
// when b is not an object.
//
// It is the slow path, taken for the rare value that strict decoding
// refuses: it decodes every field a second time.
func decodeLeniently(b []byte, dst any) error {
	v := reflect.ValueOf(dst).Elem()
	fields := jsonFields(v.Type())
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return &json.UnmarshalTypeError{Value: "non-object", Type: v.Type()}
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		i := fields.index(key)
		if i < 0 {
			continue
		}
		f := v.Field(i)
		if json.Unmarshal(raw, f.Addr().Interface()) != nil {
			f.SetZero()
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return errors.New("object not closed")
	}
	return nil
}

// fieldNames are a struct's JSON names and their field indexes.
type fieldNames struct {
	names []string
	at    []int
}

// index is the field key decodes into, -1 for none: the field named
// exactly key, else the first whose name equals key under Unicode case
// folding (encoding/json's rule).
func (f *fieldNames) index(key string) int {
	for i, n := range f.names {
		if n == key {
			return f.at[i]
		}
	}
	for i, n := range f.names {
		if strings.EqualFold(n, key) {
			return f.at[i]
		}
	}
	return -1
}

var fieldCache sync.Map // reflect.Type → *fieldNames

// jsonFields lists the exported fields of struct type t by JSON name (the
// tag's name, else the field's), skipping `json:"-"`.
func jsonFields(t reflect.Type) *fieldNames {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*fieldNames)
	}
	f := &fieldNames{}
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f.names = append(f.names, name)
		f.at = append(f.at, i)
	}
	fieldCache.Store(t, f)
	return f
}
