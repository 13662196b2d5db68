package sinkcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/env"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/takedown"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

const deleteUsage = "usage: sink delete --url U | --prefix P | --host H | --job J --reason R [--by WHO], sink delete --url U | --prefix P | --host H | --job J --dry-run [--json], sink delete --lift ID --reason R [--by WHO], or sink delete --list [--json]"

// maxReasonBytes bounds the free texts of the audit record.
const maxReasonBytes = 1000

// deleteRequest is what `sink delete` was asked.
type deleteRequest struct {
	selector takedown.Selector
	lift     uuid.UUID
	list     bool
	dryRun   bool
	json     bool
	reason   string
	by       string
}

// deleteArgs reads the arguments of `sink delete`: exactly one selector,
// --lift or --list; a reason for a takedown or a lift, none for a dry run;
// --json for a list or a dry run. Its errors are usage errors (env.ErrUsage).
func deleteArgs(args []string) (deleteRequest, error) {
	req, err := readDeleteArgs(args)
	if err != nil {
		return deleteRequest{}, env.Usage(err)
	}
	return req, nil
}

func readDeleteArgs(args []string) (deleteRequest, error) {
	fs := flag.NewFlagSet("sink delete", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	values := map[takedown.Kind]*string{}
	for _, k := range []takedown.Kind{takedown.KindURL, takedown.KindPrefix, takedown.KindHost, takedown.KindJob} {
		values[k] = fs.String(string(k), "", "")
	}
	lift := fs.String("lift", "", "")
	list := fs.Bool("list", false, "")
	dryRun := fs.Bool("dry-run", false, "")
	asJSON := fs.Bool("json", false, "")
	reason := fs.String("reason", "", "")
	by := fs.String("by", "", "")
	if err := fs.Parse(args); err != nil {
		return deleteRequest{}, fmt.Errorf("sink delete: %w (%s)", err, deleteUsage)
	}
	if fs.NArg() > 0 {
		return deleteRequest{}, fmt.Errorf("sink delete: unexpected argument %q (%s)", fs.Arg(0), deleteUsage)
	}
	req := deleteRequest{list: *list, dryRun: *dryRun, json: *asJSON, reason: strings.TrimSpace(*reason), by: strings.TrimSpace(*by)}
	var given []takedown.Kind
	for k, v := range values {
		if *v != "" {
			given = append(given, k)
		}
	}
	actions := len(given)
	if *lift != "" {
		actions++
	}
	if *list {
		actions++
	}
	if actions != 1 || (*dryRun && len(given) != 1) || (*asJSON && !*list && !*dryRun) {
		return deleteRequest{}, errors.New(deleteUsage)
	}
	if *list {
		return req, nil
	}
	if *dryRun {
		sel, err := takedown.NewSelector(given[0], *values[given[0]])
		if err != nil {
			return deleteRequest{}, fmt.Errorf("sink delete: %w", err)
		}
		req.selector = sel
		return req, nil
	}
	for _, text := range []struct{ flag, v string }{{"--reason", req.reason}, {"--by", req.by}} {
		if len(text.v) > maxReasonBytes || !utf8.ValidString(text.v) {
			return deleteRequest{}, fmt.Errorf("sink delete %s: at most %d bytes of UTF-8", text.flag, maxReasonBytes)
		}
	}
	if req.reason == "" {
		return deleteRequest{}, errors.New("sink delete: --reason is required (it is kept in the audit record)")
	}
	if *lift != "" {
		id, err := uuid.Parse(*lift)
		if err != nil {
			return deleteRequest{}, fmt.Errorf("sink delete --lift: %q is not a takedown id", *lift)
		}
		req.lift = id
		return req, nil
	}
	sel, err := takedown.NewSelector(given[0], *values[given[0]])
	if err != nil {
		return deleteRequest{}, fmt.Errorf("sink delete: %w", err)
	}
	req.selector = sel
	return req, nil
}

// runDelete is `sink delete`: a takedown (record it, remove what it covers
// from ClickHouse, the dead letters and the quarantine, record the counts),
// the lift of one, or the list of them.
//
// The record comes first: from then on every writer's filter keeps the
// selected rows out. Then the inserts already running end (they started
// before the filter could see it), and only then are rows removed, so none
// of theirs is left behind. Run again with the same selector, a takedown
// that stopped midway removes what is left, under a record of its own.
func runDelete(ctx context.Context, cfg Config, args []string, getenv func(string) string, stdout io.Writer, log zerolog.Logger) error {
	req, err := deleteArgs(args)
	if err != nil {
		return err
	}
	if req.by == "" {
		req.by = getenv("USER")
	}
	conn, err := archive.Open(cfg.ArchiveConfig)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := schema.Migrate(ctx, conn, cfg.ArchiveConfig, log); err != nil {
		return fmt.Errorf("migrate ClickHouse: %w", err)
	}
	store, err := archive.NewStore(conn, cfg.ArchiveConfig)
	if err != nil {
		return err
	}
	switch {
	case req.list:
		return listTakedowns(ctx, store, req.json, stdout)
	case req.lift != uuid.Nil:
		return liftTakedown(ctx, store, req, stdout)
	case req.dryRun:
		return showTakedown(ctx, conn, cfg, req, stdout)
	}
	t := archive.Takedown{ID: uuid.New(), Selector: req.selector, Reason: req.reason, RequestedBy: req.by, CreatedAt: time.Now().UTC()}
	if err := store.RecordTakedown(ctx, t); err != nil {
		return fmt.Errorf("record the takedown: %w", err)
	}
	if err := schema.WaitInserts(ctx, conn, cfg.ArchiveConfig); err != nil {
		return err
	}
	t.Deleted, err = schema.Purge(ctx, conn, cfg.ArchiveConfig, req.selector)
	if err != nil {
		return fmt.Errorf("takedown %s recorded, rows not all removed (run the same command again): %w", t.ID, err)
	}
	nc, js, err := stream.Connect(cfg.StreamConfig, "crawlhouse-sink-delete", log)
	if err != nil {
		return fmt.Errorf("takedown %s: rows removed, stored deliveries not (run the same command again): %w", t.ID, err)
	}
	defer nc.Close()
	if err := purgeStreams(ctx, cfg, js, req.selector, t.Deleted); err != nil {
		return fmt.Errorf("takedown %s: rows removed, stored deliveries not all (run the same command again): %w", t.ID, err)
	}
	if err := store.RecordTakedown(ctx, t); err != nil {
		return fmt.Errorf("record what takedown %s removed: %w", t.ID, err)
	}
	fmt.Fprintf(stdout, "takedown %s: %s\nremoved: %s\nkept out of the archive until: sink delete --lift %s --reason ...\n",
		t.ID, selectorText(req.selector), counts(t.Deleted), t.ID)
	return nil
}

// purgeStreams deletes the stored deliveries sel covers from the dead
// letters and the two quarantine streams (the receiver's
// RECEIVER_QUARANTINE_STREAM_INVALID and _UNVERIFIED), counting them into
// deleted under "stream <name>".
func purgeStreams(ctx context.Context, cfg Config, js jetstream.JetStream, sel takedown.Selector, deleted map[string]uint64) error {
	dl, err := delivery.NewDeadLetters(js, cfg.deadLetters().Route())
	if err != nil {
		return err
	}
	n, err := dl.Delete(ctx, sel.MatchBody)
	deleted["stream "+cfg.DLQStream] = uint64(n)
	if err != nil {
		return err
	}
	for _, class := range stream.QuarantineClasses() {
		name := cfg.QuarantineStreams.NameOf(class)
		// A quarantined delivery's data is its body as received.
		seqs, err := delivery.DeleteMatching(ctx, js, name, func(m *jetstream.RawStreamMsg) bool { return sel.MatchBody("", m.Data) })
		deleted["stream "+name] = uint64(len(seqs))
		if err != nil {
			return err
		}
	}
	return nil
}

func liftTakedown(ctx context.Context, store *archive.Store, req deleteRequest, stdout io.Writer) error {
	t, err := store.Takedown(ctx, req.lift)
	if err != nil {
		return err
	}
	if t.LiftedAt != nil {
		return fmt.Errorf("takedown %s was lifted already, at %s", t.ID, t.LiftedAt.Format(time.RFC3339))
	}
	now := time.Now().UTC()
	t.LiftedAt, t.LiftedBy, t.LiftReason = &now, req.by, req.reason
	if err := store.RecordTakedown(ctx, t); err != nil {
		return fmt.Errorf("lift takedown %s: %w", t.ID, err)
	}
	fmt.Fprintf(stdout, "takedown %s lifted: %s may be archived again (what was removed stays removed)\n", t.ID, terminalText(t.Selector.String(), 300))
	return nil
}

// TakedownJSON is a takedown as `sink delete --list --json` prints it, in
// the read API's shapes (snake_case, RFC 3339 times in UTC, null for what
// is not set).
type TakedownJSON struct {
	ID       string `json:"id"`
	Selector string `json:"selector"` // url, prefix, host or job
	Value    string `json:"value"`    // as compared (takedown.NewSelector)
	// ValueUnicode is a host's Unicode form, when its IDNA form differs.
	ValueUnicode string            `json:"value_unicode,omitempty"`
	Reason       string            `json:"reason"`
	RequestedBy  string            `json:"requested_by"`
	CreatedAt    time.Time         `json:"created_at"`
	Deleted      map[string]uint64 `json:"deleted"`
	InForce      bool              `json:"in_force"`
	LiftedAt     *time.Time        `json:"lifted_at"`
	LiftedBy     *string           `json:"lifted_by"`
	LiftReason   *string           `json:"lift_reason"`
}

// TakedownsJSON is the answer of `sink delete --list --json`, the newest
// takedown first.
type TakedownsJSON struct {
	Takedowns []TakedownJSON `json:"takedowns"`
}

// DryRunJSON is the answer of `sink delete --dry-run --json`: the selector
// as it will be recorded and the rows of each table it covers now.
type DryRunJSON struct {
	Selector     string            `json:"selector"`
	Value        string            `json:"value"`
	ValueUnicode string            `json:"value_unicode,omitempty"`
	WouldRemove  map[string]uint64 `json:"would_remove"`
}

// unicodeValue is a host selector's Unicode form when it differs from
// the value ("" otherwise).
func unicodeValue(sel takedown.Selector) string {
	if sel.Kind != takedown.KindHost {
		return ""
	}
	if u := takedown.UnicodeHost(sel.Value); u != sel.Value {
		return u
	}
	return ""
}

// selectorText is a selector for a terminal, with a host's Unicode form.
func selectorText(sel takedown.Selector) string {
	text := sel.String()
	if u := unicodeValue(sel); u != "" {
		text += " (" + u + ")"
	}
	return terminalText(text, 300)
}

func listTakedowns(ctx context.Context, store *archive.Store, asJSON bool, stdout io.Writer) error {
	ts, err := store.Takedowns(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		out := TakedownsJSON{Takedowns: []TakedownJSON{}}
		for _, t := range ts {
			j := TakedownJSON{ID: t.ID.String(), Selector: string(t.Selector.Kind), Value: t.Selector.Value, ValueUnicode: unicodeValue(t.Selector),
				Reason: t.Reason, RequestedBy: t.RequestedBy, CreatedAt: t.CreatedAt.UTC(), Deleted: t.Deleted, InForce: t.LiftedAt == nil}
			if j.Deleted == nil {
				j.Deleted = map[string]uint64{}
			}
			if t.LiftedAt != nil {
				at := t.LiftedAt.UTC()
				j.LiftedAt, j.LiftedBy, j.LiftReason = &at, &t.LiftedBy, &t.LiftReason
			}
			out.Takedowns = append(out.Takedowns, j)
		}
		return writeJSON(stdout, out)
	}
	for _, t := range ts {
		state := "in force"
		if t.LiftedAt != nil {
			state = "lifted " + t.LiftedAt.Format(time.RFC3339) + " by " + terminalText(t.LiftedBy, 100) + ": " + terminalText(t.LiftReason, 200)
		}
		fmt.Fprintf(stdout, "%s  %s  %s  by %s: %s  (%s)\n  removed: %s\n", t.ID, t.CreatedAt.Format(time.RFC3339), selectorText(t.Selector),
			terminalText(t.RequestedBy, 100), terminalText(t.Reason, 200), state, counts(t.Deleted))
	}
	if len(ts) == 0 {
		fmt.Fprintln(stdout, "no takedowns")
	}
	return nil
}

// showTakedown is `sink delete --dry-run`: what the takedown would remove
// from each table now, removing nothing and recording nothing.
func showTakedown(ctx context.Context, conn driver.Conn, cfg Config, req deleteRequest, stdout io.Writer) error {
	n, err := schema.Count(ctx, conn, cfg.ArchiveConfig, req.selector)
	if err != nil {
		return err
	}
	if req.json {
		return writeJSON(stdout, DryRunJSON{Selector: string(req.selector.Kind), Value: req.selector.Value, ValueUnicode: unicodeValue(req.selector), WouldRemove: n})
	}
	fmt.Fprintf(stdout, "dry run, nothing removed: %s\nwould remove: %s\n(and the stored deliveries it covers from the dead letters and the quarantine)\n",
		selectorText(req.selector), counts(n))
	return nil
}

// counts says how many rows each table lost, in name order.
func counts(deleted map[string]uint64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(deleted)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, deleted[k]))
	}
	if len(parts) == 0 {
		return "nothing yet"
	}
	return strings.Join(parts, ", ")
}
