package events

// Decode parses and validates a delivery body, as the receiver and then
// the sink would (tests only). The returned error wraps
// ErrInvalid and names the offending field (see *InvalidError).
func Decode(body []byte) (*Event, error) {
	if _, err := Validate(body); err != nil {
		return nil, err
	}
	ev, err := DecodeAccepted(body)
	if err != nil {
		return nil, invalid("", "body: %v", err)
	}
	return ev, nil
}
