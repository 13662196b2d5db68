package events

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
)

// ErrInvalid is wrapped by every validation error, so callers can branch
// with errors.Is(err, events.ErrInvalid).
var ErrInvalid = errors.New("invalid payload")

// InvalidError says which field of a delivery is wrong and why.
type InvalidError struct {
	// Field is the JSON name of the offending field ("webhookId",
	// "data[0]"), or empty when the body as a whole is not an object.
	Field string
	// Reason is a short human explanation.
	Reason string
}

func (e *InvalidError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Head is what the pipeline needs to know of a delivery without decoding its
// documents: enough to route, deduplicate and account for it.
type Head struct {
	Type string
	// CrawlID is the job id (id, else the v0 API's jobId): a canonical
	// UUID for page and job events, any string for a raw event (see
	// Event.ID).
	CrawlID string
	// WebhookID is the delivery's webhookId, or the key derived from its
	// body when it has none (KeyDerived): the deduplication key either way.
	WebhookID string
	// KeyDerived is set when WebhookID is DerivedKey's.
	KeyDerived bool
	Success    bool
	// Documents is the number of elements of data (page events only).
	Documents int
}

// MaxTypeLength bounds the event type, which becomes a subject token.
const MaxTypeLength = 128

const jsonSpace = " \t\r\n"

// maxDepth is encoding/json's nesting limit, kept so that Validate accepts
// exactly what encoding/json (and so the sink) accepts. Deeper input is
// refused after at most maxDepth bytes of brackets.
const maxDepth = 10000

// Validate checks a delivery body and returns its Head. The rules, for
// every type: the body is a JSON object; type is a non-empty string that is
// a valid subject token (letters, digits, '.', '_', '-'); webhookId, when
// present and not null, is a UUID string, and when absent the key is
// derived from the body (DerivedKey: senders before 2025-12-12 send none).
// The job id is id, else (id absent or null) jobId, as the v0 API names it.
//
// Page and job events (ClassOf: crawl.* and batch_scrape.*) feed pages,
// failures and backfill, so their envelope is checked: the job id is a
// UUID string; success is a boolean; error, when present and not null, is
// a string; metadata, when present and not null, is an object. A page
// event's data is an array of objects, and in a successful one every
// document has a page URL, a non-empty string metadata.url or
// metadata.sourceURL, since the archive keys pages by it (the sender
// always sets sourceURL; a failed page without one is accepted and
// archived as a failure). Other events' data may be any JSON value, or
// absent.
//
// Raw events (every other type: extract.*, monitor.*, types the API adds
// later) are kept whole whatever their shape: nothing but the type and
// webhookId is required of them. The job id is kept when it is a string
// (cut to MaxJobIDLength), success when it is true.
//
// Unknown fields are allowed: the API adds fields over time.
//
// It reads the body once: one scan checks the JSON syntax and UTF-8 and
// notes where the envelope's fields are and what data holds, without
// decoding or allocating anything but the Head's strings. It accepts
// exactly what encoding/json.Unmarshal accepts (same nesting limit; keys
// matched as encoding/json matches struct fields: exactly, else
// case-insensitively; the last of repeated keys wins), plus valid UTF-8;
// FuzzValidateDifferential holds it to that.
func Validate(body []byte) (Head, error) {
	var h Head
	// JSON's whitespace only: bytes.TrimSpace would also drop U+0085 and
	// U+00A0, which encoding/json (and so the sink) refuses.
	body = bytes.Trim(body, jsonSpace)
	if len(body) == 0 {
		return h, invalid("", "body is empty")
	}
	if body[0] != '{' {
		return h, invalid("", "body is not a JSON object")
	}
	var env scannedEnvelope
	if err := env.scan(body); err != nil {
		if errors.Is(err, errUTF8) || !utf8.Valid(body) {
			return h, invalid("", "body is not valid UTF-8")
		}
		return h, invalid("", "body is not valid JSON: %v", err)
	}
	typ, typeErr := stringField("type", env.typ)
	if typeErr == nil {
		typeErr = checkType(typ)
	}
	if typeErr == nil && ClassOf(typ) == ClassRaw {
		return rawHead(body, typ, &env)
	}
	var err error
	if h.Success, err = boolField("success", env.success); err != nil {
		return h, err
	}
	if typeErr != nil {
		return h, typeErr
	}
	h.Type = typ
	name := "id"
	if isNull(env.id) && !isNull(env.jobID) {
		name = "jobId"
	}
	if h.CrawlID, err = uuidField(name, jobIDField(env.id, env.jobID)); err != nil {
		return h, err
	}
	if err := h.key(body, env.webhookID); err != nil {
		return h, err
	}
	if IsPageType(h.Type) {
		if h.Documents, err = env.data.check(); err != nil {
			return h, err
		}
		if h.Success && env.data.noURL >= 0 {
			return h, invalid("data["+strconv.Itoa(env.data.noURL)+"].metadata", "needs url or sourceURL")
		}
	}
	if !isNull(env.errorField) && kind(env.errorField) != '"' {
		return h, invalid("error", "must be a string")
	}
	if !isNull(env.metadata) && kind(env.metadata) != '{' {
		return h, invalid("metadata", "must be an object")
	}
	return h, nil
}

// rawHead is Validate's Head for a raw event (ClassRaw): only webhookId,
// when present, can make it invalid.
func rawHead(body []byte, typ string, env *scannedEnvelope) (Head, error) {
	h := Head{Type: typ, Success: string(env.success) == "true", CrawlID: jobIDOf(jobIDField(env.id, env.jobID))}
	return h, h.key(body, env.webhookID)
}

// key sets the Head's deduplication key: the webhookId, canonical, or the
// key derived from the body when the delivery has none.
func (h *Head) key(body, webhookID []byte) error {
	if isNull(webhookID) {
		h.WebhookID, h.KeyDerived = DerivedKey(body), true
		return nil
	}
	var err error
	h.WebhookID, err = uuidField("webhookId", webhookID)
	return err
}

// jobIDField is the value that names the job: id, else (id absent or null)
// jobId, as the v0 API's deliveries name it.
func jobIDField(id, jobID []byte) []byte {
	if isNull(id) {
		return jobID
	}
	return id
}

// jobIDOf is the job id a raw value names: the string, cut to
// MaxJobIDLength bytes at a character boundary; empty for anything else,
// and for a string holding control characters, which the id's message
// header could not carry (the body keeps it as sent).
func jobIDOf(raw []byte) string {
	s := stringOnly(raw)
	if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return ""
	}
	if len(s) <= MaxJobIDLength {
		return s
	}
	cut := MaxJobIDLength
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// scannedEnvelope is what one scan of a body notes: the raw bytes of the
// scalar fields (slices of the body) and a summary of data.
type scannedEnvelope struct {
	success, typ, id, jobID, webhookID, errorField, metadata []byte
	data                                                     dataSummary
	// repeated is set when one of the envelope's keys came twice (the
	// last wins, as in encoding/json).
	repeated bool
}

// dataSummary describes the data field without keeping its documents.
type dataSummary struct {
	raw []byte // first bytes of the value; nil when absent
	// elements of an array, the index of the first one that is not an
	// object (-1: all are), and of the first object without a page URL
	// (-1: all have one; see scanner.document).
	elements, notObject, noURL int
	// spans are the elements' bytes (slices of the body), kept only when
	// the scan was asked to (keepSpans): the sink decodes each Document
	// from its span; Validate needs only the counts.
	spans     [][]byte
	keepSpans bool
}

func (d dataSummary) check() (int, error) {
	switch {
	case isNull(d.raw):
		return 0, invalid("data", "is required")
	case kind(d.raw) != '[':
		return 0, invalid("data", "must be an array of documents")
	case d.notObject >= 0:
		return 0, invalid("data["+strconv.Itoa(d.notObject)+"]", "must be an object")
	}
	return d.elements, nil
}

// errUTF8 is a string holding bytes that are not UTF-8.
var errUTF8 = errors.New("invalid UTF-8")

// syntaxError is a JSON syntax error at a byte offset.
type syntaxError struct {
	msg string
	at  int
}

func (e *syntaxError) Error() string { return e.msg + " at offset " + strconv.Itoa(e.at) }

// scanner is a recursive-descent JSON checker over one body.
type scanner struct {
	b     []byte
	i     int
	depth int
}

func (s *scanner) fail(msg string) error {
	if s.i >= len(s.b) {
		return &syntaxError{"unexpected end of JSON input", s.i}
	}
	return &syntaxError{msg + " " + strconv.QuoteRune(rune(s.b[s.i])), s.i}
}

// scan checks body (which starts with '{') and fills e from its top-level
// object.
func (e *scannedEnvelope) scan(body []byte) error {
	s := scanner{b: body}
	e.data.notObject, e.data.noURL = -1, -1
	s.i++ // '{'
	s.depth = 1
	s.ws()
	if s.peek() == '}' {
		s.i++
	} else {
		for {
			if s.peek() != '"' {
				return s.fail("invalid character looking for beginning of object key string:")
			}
			keyStart := s.i
			escaped, err := s.str()
			if err != nil {
				return err
			}
			key := body[keyStart+1 : s.i-1]
			s.ws()
			if s.peek() != ':' {
				return s.fail("invalid character after object key:")
			}
			s.i++
			s.ws()
			field := e.field(key, escaped)
			if field != nil && *field != nil {
				e.repeated = true
			}
			valueStart := s.i
			if field == &e.data.raw && s.peek() == '[' {
				if err := s.dataArray(&e.data); err != nil {
					return err
				}
			} else if err := s.value(); err != nil {
				return err
			}
			if field != nil {
				*field = body[valueStart:s.i]
				if field == &e.data.raw && body[valueStart] != '[' {
					e.data.elements, e.data.notObject, e.data.noURL = 0, -1, -1
					e.data.spans = e.data.spans[:0]
				}
			}
			s.ws()
			switch s.peek() {
			case ',':
				s.i++
				s.ws()
				continue
			case '}':
				s.i++
			default:
				return s.fail("invalid character after object key:value pair:")
			}
			break
		}
	}
	s.ws()
	if s.i != len(body) {
		return s.fail("invalid character after top-level value:")
	}
	return nil
}

// envelopeFields are the envelope's keys, in the order of scannedEnvelope.
var envelopeFields = [...]string{"success", "type", "id", "jobId", "webhookId", "error", "metadata", "data"}

// field is where the value of top-level key goes, nil for other keys.
// Keys match like encoding/json matches struct fields: exactly, else
// case-insensitively with Unicode folding.
func (e *scannedEnvelope) field(key []byte, escaped bool) *[]byte {
	if key = unescapeKey(key, escaped); key == nil {
		return nil
	}
	slots := [...]*[]byte{&e.success, &e.typ, &e.id, &e.jobID, &e.webhookID, &e.errorField, &e.metadata, &e.data.raw}
	for i, name := range envelopeFields {
		if string(key) == name {
			return slots[i]
		}
	}
	for i, name := range envelopeFields {
		if bytes.EqualFold(key, []byte(name)) {
			return slots[i]
		}
	}
	return nil
}

// unescapeKey returns the object key whose bytes between the quotes are
// key, nil if it does not decode.
func unescapeKey(key []byte, escaped bool) []byte {
	if !escaped {
		return key
	}
	var k string
	if json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &k) != nil {
		return nil
	}
	return []byte(k)
}

// dataArray scans the array value of data, counting its elements and
// noting the first that is not an object and the first without a page URL.
func (s *scanner) dataArray(d *dataSummary) error {
	d.elements, d.notObject, d.noURL = 0, -1, -1
	d.spans = d.spans[:0]
	if s.depth++; s.depth > maxDepth {
		return &syntaxError{"exceeded max depth", s.i}
	}
	s.i++ // '['
	s.ws()
	if s.peek() == ']' {
		s.i++
		s.depth--
		return nil
	}
	for {
		start := s.i
		if s.peek() != '{' {
			if d.notObject < 0 {
				d.notObject = d.elements
			}
			if err := s.value(); err != nil {
				return err
			}
		} else {
			hasURL, err := s.document()
			if err != nil {
				return err
			}
			if !hasURL && d.noURL < 0 {
				d.noURL = d.elements
			}
		}
		if d.keepSpans {
			d.spans = append(d.spans, s.b[start:s.i])
		}
		d.elements++
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
			s.ws()
		case ']':
			s.i++
			s.depth--
			return nil
		default:
			return s.fail("invalid character after array element:")
		}
	}
}

// document scans a Document (an object) and says whether it has a page URL
// as decoding it sees one (Metadata.PageURL): its metadata key, the last of
// them, matched as encoding/json matches the Document's field (exactly, else
// case-insensitively), holds an object with a non-empty string url or
// sourceURL.
func (s *scanner) document() (hasURL bool, err error) {
	return hasURL, s.members(func(key []byte, escaped bool) error {
		// Only keys of eight ASCII bytes fold to "metadata" (it has no k
		// or s, whose folds include non-ASCII letters).
		if !escaped && len(key) != len("metadata") {
			return s.value()
		}
		if k := unescapeKey(key, escaped); k == nil || !bytes.EqualFold(k, []byte("metadata")) {
			return s.value()
		}
		if s.peek() != '{' {
			hasURL = false
			return s.value()
		}
		var err error
		hasURL, err = s.metadata()
		return err
	})
}

// metadata scans a Document's metadata object and says whether its url or
// sourceURL (keys matched exactly, the last of repeated ones winning, as
// Metadata.UnmarshalJSON reads them) is a non-empty string.
func (s *scanner) metadata() (hasURL bool, err error) {
	var url, source bool
	err = s.members(func(key []byte, escaped bool) error {
		var slot *bool
		switch string(unescapeKey(key, escaped)) {
		case "url":
			slot = &url
		case "sourceURL":
			slot = &source
		default:
			return s.value()
		}
		start := s.i
		if err := s.value(); err != nil {
			return err
		}
		// A string is non-empty when anything stands between its quotes:
		// every escape decodes to at least one byte.
		*slot = s.b[start] == '"' && s.i-start > 2
		return nil
	})
	return url || source, err
}

// members scans an object starting at its '{', calling member for each key
// (the bytes between its quotes, and whether they hold escapes) with the
// scanner at the start of the value; member must scan the value.
func (s *scanner) members(member func(key []byte, escaped bool) error) error {
	if s.depth++; s.depth > maxDepth {
		return &syntaxError{"exceeded max depth", s.i}
	}
	s.i++
	s.ws()
	if s.peek() == '}' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if s.peek() != '"' {
			return s.fail("invalid character looking for beginning of object key string:")
		}
		keyStart := s.i
		escaped, err := s.str()
		if err != nil {
			return err
		}
		key := s.b[keyStart+1 : s.i-1]
		s.ws()
		if s.peek() != ':' {
			return s.fail("invalid character after object key:")
		}
		s.i++
		s.ws()
		if err := member(key, escaped); err != nil {
			return err
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			s.depth--
			return nil
		default:
			return s.fail("invalid character after object key:value pair:")
		}
	}
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value scans one JSON value.
func (s *scanner) value() error {
	switch c := s.peek(); {
	case c == '{':
		return s.object()
	case c == '[':
		return s.array()
	case c == '"':
		_, err := s.str()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return s.fail("invalid character looking for beginning of value:")
}

// object scans an object whose members are not looked at.
func (s *scanner) object() error {
	return s.members(func([]byte, bool) error { return s.value() })
}

func (s *scanner) array() error {
	if s.depth++; s.depth > maxDepth {
		return &syntaxError{"exceeded max depth", s.i}
	}
	s.i++
	s.ws()
	if s.peek() == ']' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if err := s.value(); err != nil {
			return err
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
			s.ws()
		case ']':
			s.i++
			s.depth--
			return nil
		default:
			return s.fail("invalid character after array element:")
		}
	}
}

// plain marks the string bytes that need no attention: printable ASCII
// other than '"' and '\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// needsAttention reports whether any of the eight bytes in x is not plain:
// a control character (< 0x20), '"', '\\' or a byte of a multi-byte UTF-8
// sequence (>= 0x80). Bit tricks on the whole word: for a byte y,
// (y - 0x01) &^ y has its high bit set exactly when y is 0.
func needsAttention(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(y uint64) uint64 { return (y - ones) &^ y & highs }
	control := (x - 0x20*ones) &^ x & highs // bytes < 0x20 (x's high bits are checked below)
	return (x&highs | control | zero(x^'"'*ones) | zero(x^'\\'*ones)) != 0
}

// str scans a string starting at its opening quote and says whether it
// holds escapes. Control characters, bad escapes and invalid UTF-8 fail.
func (s *scanner) str() (escaped bool, err error) {
	b := s.b
	i := s.i + 1
	for {
		// Eight bytes at a time while none needs attention (most of a
		// page's markdown), then byte by byte up to the one that does.
		for i+8 <= len(b) && !needsAttention(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i >= len(b) {
			s.i = i
			return escaped, s.fail("")
		}
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			return escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				s.i = len(b)
				return escaped, s.fail("")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := 2; k < 6; k++ {
					if i+k >= len(b) {
						s.i = len(b)
						return escaped, s.fail("")
					}
					if !isHex(b[i+k]) {
						s.i = i + k
						return escaped, s.fail("invalid character in \\u hexadecimal character escape:")
					}
				}
				i += 6
			default:
				s.i = i + 1
				return escaped, s.fail("invalid character in string escape code:")
			}
		case c < 0x20:
			s.i = i
			return escaped, s.fail("invalid character in string literal:")
		default: // >= 0x80
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return escaped, errUTF8
			}
			i += n
		}
	}
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func (s *scanner) literal(word string) error {
	for k := 0; k < len(word); k++ {
		if s.i >= len(s.b) || s.b[s.i] != word[k] {
			return s.fail("invalid character in literal " + word + " (expecting " + strconv.QuoteRune(rune(word[k])) + "):")
		}
		s.i++
	}
	return nil
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() error {
	if s.peek() == '-' {
		s.i++
	}
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return s.fail("invalid character in numeric literal:")
	}
	if s.peek() == '.' {
		s.i++
		if c := s.peek(); c < '0' || c > '9' {
			return s.fail("invalid character after decimal point in numeric literal:")
		}
		s.digits()
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if c := s.peek(); c < '0' || c > '9' {
			return s.fail("invalid character in exponent of numeric literal:")
		}
		s.digits()
	}
	return nil
}

func (s *scanner) digits() {
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
}

func isNull(raw []byte) bool { return len(raw) == 0 || string(raw) == "null" }

func kind(raw []byte) byte {
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

func boolField(name string, raw []byte) (bool, error) {
	switch string(raw) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "", "null":
		return false, invalid(name, "is required")
	}
	return false, invalid(name, "must be a boolean")
}

// stringField decodes a string value; the scan has checked its syntax and
// UTF-8, so a string without escapes is its bytes between the quotes.
func stringField(name string, raw []byte) (string, error) {
	if isNull(raw) {
		return "", invalid(name, "is required")
	}
	if kind(raw) != '"' {
		return "", invalid(name, "must be a string")
	}
	var s string
	if bytes.IndexByte(raw, '\\') < 0 {
		s = string(raw[1 : len(raw)-1])
	} else if err := json.Unmarshal(raw, &s); err != nil {
		return "", invalid(name, "must be a string")
	}
	if s == "" {
		return "", invalid(name, "must not be empty")
	}
	return s, nil
}

func uuidField(name string, raw []byte) (string, error) {
	if len(raw) == 38 && raw[0] == '"' && raw[37] == '"' {
		// The usual case, parsed where it lies: its one string is the
		// canonical form below.
		if u, err := uuid.ParseBytes(raw[1:37]); err == nil {
			return u.String(), nil
		}
	}
	s, err := stringField(name, raw)
	if err != nil {
		return "", err
	}
	u, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return "", invalid(name, "must be a UUID like 0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
	}
	// The canonical lower-case form, so that the same id always dedups.
	return u.String(), nil
}

func checkType(t string) error {
	if len(t) > MaxTypeLength {
		return invalid("type", "must be at most %d characters", MaxTypeLength)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return invalid("type", "may hold only letters, digits, '.', '_' and '-'")
		}
	}
	if t[0] == '.' || t[len(t)-1] == '.' || bytes.Contains([]byte(t), []byte("..")) {
		return invalid("type", "must not have empty dot-separated parts")
	}
	return nil
}
