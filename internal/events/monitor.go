package events

import (
	"bytes"
	"encoding/json"
)

// Monitor event types (the API's change monitoring, 2026-05 on).
const (
	// TypeMonitorPage reports one URL of a monitor check: its change
	// status and the scrape ids compared.
	TypeMonitorPage = "monitor.page"
	// TypeMonitorCheckCompleted ends a check, with a summary.
	TypeMonitorCheckCompleted = "monitor.check.completed"
)

// MonitorPage is the change status of one URL in a monitor check, as a
// monitor.page event reports it.
type MonitorPage struct {
	MonitorID string
	CheckID   string
	URL       string
	// Status is the sender's word: same, changed, new, removed, error.
	Status           string
	PreviousScrapeID string
	CurrentScrapeID  string
	// IsMeaningful is the sender's judgement of the change, nil when it
	// made none (senders before 2026-05-26 never do).
	IsMeaningful *bool
	Error        string
}

// MonitorPages reads the per-URL results of a monitor.page event: data is
// one object (senders of early 2026-05) or an array of them (later ones).
// It is lenient, as what it reads is kept whole anyway: an element that is
// not an object, a field of an unexpected type, or data of another shape
// give nothing for that element or field, and an element without a url is
// skipped. The check id defaults to the event's job id, which the sender
// sets to it.
func MonitorPages(ev *Event) []MonitorPage {
	if ev.Type != TypeMonitorPage {
		return nil
	}
	var elems []json.RawMessage
	switch kind(bytes.TrimLeft(ev.RawData, jsonSpace)) {
	case '{':
		elems = []json.RawMessage{ev.RawData}
	case '[':
		if json.Unmarshal(ev.RawData, &elems) != nil {
			return nil
		}
	}
	var out []MonitorPage
	for _, e := range elems {
		var w struct {
			MonitorID, CheckID, URL, Status   json.RawMessage
			PreviousScrapeID, CurrentScrapeID json.RawMessage
			IsMeaningful, Error               json.RawMessage
		}
		if json.Unmarshal(e, &w) != nil {
			continue
		}
		p := MonitorPage{
			MonitorID: stringOnly(w.MonitorID), CheckID: stringOnly(w.CheckID), URL: stringOnly(w.URL),
			Status: stringOnly(w.Status), PreviousScrapeID: stringOnly(w.PreviousScrapeID),
			CurrentScrapeID: stringOnly(w.CurrentScrapeID), Error: stringOnly(w.Error),
		}
		if b := string(w.IsMeaningful); b == "true" || b == "false" {
			m := b == "true"
			p.IsMeaningful = &m
		}
		if p.URL == "" {
			continue
		}
		if p.CheckID == "" {
			p.CheckID = ev.ID
		}
		out = append(out, p)
	}
	return out
}
