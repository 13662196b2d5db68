package events

import (
	"bytes"
	"strconv"
)

// decodeDirect decodes the Document b as json.Unmarshal(b, &f) would, with
// the receiver's scanner and no reflection: the shape every real sender
// sends (string fields, a metadata object of strings, numbers and booleans,
// keys this version does not know). decodeLifted left what remains after
// the page's text to encoding/json, which decoded each metadata value twice
// (into a map, then into its field) and was the largest part of the sink's
// CPU per page. ok is false for anything it is not sure to decode exactly as
// encoding/json does: links, actions, changeTracking or branding present, a
// known key repeated or spelled in another case, a field holding a value of
// another type, bytes the scanner refuses. The caller then takes the old
// path (FuzzDocumentDifferential holds both to encoding/json).
func decodeDirect(b []byte) (f documentFields, ok bool) {
	if len(b) == 0 || b[0] != '{' {
		return f, false
	}
	var seen [len(liftedFields) + 1]bool // the string fields, then metadata
	s := scanner{b: b}
	err := s.members(func(key []byte, escaped bool) error {
		k := unescapeKey(key, escaped)
		if k == nil {
			return errNotLifted
		}
		start := s.i
		if err := s.value(); err != nil {
			return err
		}
		v := b[start:s.i]
		j := directField(k)
		switch {
		case j < 0:
			return nil // a key encoding/json ignores
		case j == len(liftedFields)+1:
			return errNotLifted // a field not decoded here
		case seen[j]:
			return errNotLifted
		}
		seen[j] = true
		if j == len(liftedFields) {
			return f.Metadata.decodeDirect(v)
		}
		switch v[0] {
		case '"':
			*liftedFields[j].field(&f) = unquote(v)
		case 'n': // null leaves a string as it is
		default:
			return errNotLifted
		}
		return nil
	})
	if err != nil {
		return documentFields{}, false
	}
	if s.ws(); s.i != len(b) {
		return documentFields{}, false
	}
	return f, true
}

// directField is the field the key k decodes into: the index of a string
// field in liftedFields, len(liftedFields) for metadata, len(liftedFields)+1
// for the other fields (and for a key naming any field in another case,
// which encoding/json matches case-insensitively), -1 for a key no field
// takes.
func directField(k []byte) int {
	for j := range liftedFields {
		if string(k) == liftedFields[j].name {
			return j
		}
	}
	if string(k) == "metadata" {
		return len(liftedFields)
	}
	for _, name := range documentOtherFields {
		if bytes.EqualFold(k, []byte(name)) {
			return len(liftedFields) + 1
		}
	}
	for j := range liftedFields {
		if bytes.EqualFold(k, []byte(liftedFields[j].name)) {
			return len(liftedFields) + 1
		}
	}
	return -1
}

// documentOtherFields are the JSON names of the Document's fields that
// decodeDirect leaves to encoding/json, and metadata in any case but its
// own.
var documentOtherFields = [...]string{"links", "actions", "changeTracking", "branding", "metadata"}

// decodeDirect decodes the metadata value v (checked by the scanner) as
// Metadata.UnmarshalJSON does, or returns errNotLifted: for a value that is
// neither an object nor null, and for a key repeated (encoding/json's map
// keeps the last; a field set twice here might not).
func (m *Metadata) decodeDirect(v []byte) error {
	if v[0] == 'n' {
		*m = Metadata{}
		return nil
	}
	if v[0] != '{' {
		return errNotLifted
	}
	*m = Metadata{}
	var keys [][]byte
	s := scanner{b: v}
	return s.members(func(key []byte, escaped bool) error {
		k := unescapeKey(key, escaped)
		if k == nil {
			return errNotLifted
		}
		for _, seen := range keys {
			if bytes.Equal(seen, k) {
				return errNotLifted
			}
		}
		keys = append(keys, k)
		start := s.i
		if err := s.value(); err != nil {
			return err
		}
		val := v[start:s.i]
		if !metadataKnown[string(k)] {
			// Extra keeps the raw value, as a copy of its own; a known
			// key's value is read into a new string or number and not
			// kept, so it is not copied first.
			val = bytes.Clone(val)
		}
		m.set(string(k), val, true)
		return nil
	})
}

// checkedString is a JSON value's string when it is a string literal the
// scanner checked (unquote's precondition); ok is false for other values.
func checkedString(v []byte, checked bool) (s string, ok bool) {
	if !checked || len(v) < 2 || v[0] != '"' {
		return "", false
	}
	return unquote(v), true
}

// checkedNumber is a JSON number literal's value, as encoding/json reads
// it into a float64 (strconv.ParseFloat; out of range is not a number);
// ok is false for other values.
func checkedNumber(v []byte, checked bool) (f float64, ok bool) {
	if !checked || len(v) == 0 || v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	return f, err == nil
}
