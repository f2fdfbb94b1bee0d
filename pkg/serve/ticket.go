package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"

	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/query"
)

// Query is a parsed ticket: what a DoGet streams and what a command
// descriptor of GetFlightInfo describes. docs/FLIGHT.md is the user-facing
// grammar.
//
// A ticket is a JSON object:
//
//	{"dataset": "PET",                         required
//	 "series": ["A", "B"] | "prefix": "PET." | "category": "Crude",   exactly one
//	 "start": "2019", "end": "2020-06",       optional period bounds (inclusive)
//	 "columns": ["value"],                    optional, default: value and the other data columns
//	 "attributes": true,                      optional: add every per-series attribute column
//	 "latest": true,                          optional: one row per series, its last non-null value
//	 "limit": 1000,                           optional: at most this many rows (the first, in output order)
//	 "snapshot": 42,                          optional: refuse (FailedPrecondition) unless snapshot 42 is served
//	 "vintage": 40,                           optional: read retained vintage 40 as published (not with snapshot)
//	 "shard": 1}                              sharded datasets: run on shard 1 only (GetFlightInfo's endpoints carry it)
type Query struct {
	Dataset string

	// Exactly one selector is set.
	Series      []string // as given (order and duplicates are irrelevant)
	Prefix      string
	HasPrefix   bool
	Category    string
	HasCategory bool

	// From and To are the inclusive date32 bounds: From is the first day of
	// the start period, To the last day of the end period. Absent bounds are
	// math.MinInt32 / math.MaxInt32.
	From, To   int32
	Start, End string // as given, for messages

	Columns    []string // nil: the default columns
	HasColumns bool
	Attributes bool
	Latest     bool

	// Snapshot, if not 0, is the snapshot id the client requires; another
	// live snapshot is FailedPrecondition.
	Snapshot uint64
	// Vintage, if not 0, is the retained vintage to read, as it was
	// published (served.Dataset.AcquireVintage); NotFound when gc removed
	// it. Not with Snapshot, nor on a sharded dataset.
	Vintage uint64
	// Limit, if not 0, caps the rows of the answer.
	Limit int64
	// Shard, when HasShard, scopes the ticket to one shard of a sharded
	// dataset (shards.go).
	Shard    int
	HasShard bool
}

// Request is the ticket as the read layer's request.
func (q *Query) Request() query.Request {
	r := query.Request{
		Range:      query.Range{From: q.From, To: q.To},
		Attributes: q.Attributes,
		Latest:     q.Latest,
		Snapshot:   q.Snapshot,
		Limit:      q.Limit,
	}
	if q.HasColumns {
		r.Columns = q.Columns
		if r.Columns == nil {
			r.Columns = []string{}
		}
	}
	switch {
	case q.HasPrefix:
		r.Select = query.Selector{Kind: query.ByPrefix, Prefix: q.Prefix}
	case q.HasCategory:
		r.Select = query.Selector{Kind: query.ByCategory, Category: q.Category}
	default:
		r.Select = query.Selector{Kind: query.ByIDs, IDs: q.Series}
	}
	return r
}

// Schema metadata keys of every stream and FlightInfo schema (the read
// layer's; repeated here for clients of this package).
const (
	MetaSnapshotID = query.MetaSnapshotID
	MetaDataset    = query.MetaDataset
)

// Error is a ticket error with the gRPC code it maps to. Messages are
// written for the client: they say which field is wrong and why.
type Error struct {
	Code codes.Code
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func errf(code codes.Code, format string, a ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, a...)}
}

func invalid(format string, a ...any) *Error {
	return errf(codes.InvalidArgument, "ticket: "+format, a...)
}

// ticketFields lists the accepted keys, in the order messages show them.
var ticketFields = []string{"dataset", "series", "prefix", "category", "start", "end", "columns", "attributes", "latest", "limit", "snapshot", "vintage", "shard"}

// ParseTicket decodes a ticket (or a GetFlightInfo command). It is strict:
// unknown or repeated keys, nulls, wrong types, trailing data, invalid UTF-8
// and bad periods are InvalidArgument errors, because a typo must not
// silently widen a query. A ticket longer than maxBytes, or listing more than
// maxSeries series, is ResourceExhausted (0 disables either limit). It never
// panics.
//
// The Query's strings may be views of b rather than copies: b must not
// change while the Query is in use (a gRPC request's bytes are its own).
func ParseTicket(b []byte, maxBytes, maxSeries int) (*Query, error) {
	if maxBytes > 0 && len(b) > maxBytes {
		return nil, errf(codes.ResourceExhausted, "ticket: %d bytes, limit %d", len(b), maxBytes)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, invalid("empty; want a JSON object such as {\"dataset\":\"NAME\",\"series\":[\"ID\"]}")
	}
	if !utf8.Valid(b) {
		return nil, invalid("not valid UTF-8")
	}
	if err := checkSurrogates(b); err != nil {
		return nil, err
	}
	q, seen, ok := parseTicketFast(b)
	if !ok {
		var err error
		if q, seen, err = parseTicketJSON(b); err != nil {
			return nil, err
		}
	}
	return checkTicket(q, seen, maxSeries)
}

// fieldSet is a set of ticket fields, by their position in ticketFields.
type fieldSet uint32

func (s fieldSet) has(key string) bool {
	i := slices.Index(ticketFields, key)
	return i >= 0 && s&(1<<i) != 0
}

func (s *fieldSet) add(key string) { *s |= 1 << slices.Index(ticketFields, key) }

// parseTicketJSON decodes a ticket with encoding/json, token by token, so
// every mistake gets its message.
func parseTicketJSON(b []byte) (*Query, fieldSet, error) {
	var seen fieldSet
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, 0, invalid("not JSON: %s", jsonMsg(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, 0, invalid("must be a JSON object, not %s", describeToken(tok))
	}
	q := &Query{From: math.MinInt32, To: math.MaxInt32}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, 0, invalid("not JSON: %s", jsonMsg(err))
		}
		key, ok := tok.(string)
		if !ok { // the decoder only yields strings here, but be safe
			return nil, 0, invalid("object key is not a string")
		}
		if seen.has(key) {
			return nil, 0, invalid("field %q given twice", key)
		}
		if slices.Contains(ticketFields, key) {
			seen.add(key)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, 0, invalid("field %q: not JSON: %s", key, jsonMsg(err))
		}
		if bytes.Equal(raw, []byte("null")) {
			return nil, 0, invalid("field %q is null; leave it out instead", key)
		}
		var ferr *Error
		switch key {
		case "dataset":
			ferr = decodeField(raw, key, "a string", &q.Dataset)
		case "series":
			q.Series, ferr = decodeStrings(raw, key)
		case "prefix":
			ferr = decodeField(raw, key, "a string", &q.Prefix)
			q.HasPrefix = true
		case "category":
			ferr = decodeField(raw, key, "a string", &q.Category)
			q.HasCategory = true
		case "start":
			ferr = decodeField(raw, key, "a period string such as \"2019-03\"", &q.Start)
		case "end":
			ferr = decodeField(raw, key, "a period string such as \"2020-12-31\"", &q.End)
		case "columns":
			q.Columns, ferr = decodeStrings(raw, key)
			q.HasColumns = true
		case "attributes":
			ferr = decodeField(raw, key, "true or false", &q.Attributes)
		case "latest":
			ferr = decodeField(raw, key, "true or false", &q.Latest)
		case "limit":
			ferr = decodeField(raw, key, "a positive integer row count", &q.Limit)
			if ferr == nil && q.Limit <= 0 {
				ferr = invalid("field \"limit\" must be a positive integer row count, got %d", q.Limit)
			}
		case "snapshot":
			ferr = decodeField(raw, key, "a positive integer snapshot id", &q.Snapshot)
			if ferr == nil && q.Snapshot == 0 {
				ferr = invalid("field \"snapshot\" must be a positive integer snapshot id, got 0")
			}
		case "vintage":
			ferr = decodeField(raw, key, "a positive integer snapshot id", &q.Vintage)
			if ferr == nil && q.Vintage == 0 {
				ferr = invalid("field \"vintage\" must be a positive integer snapshot id, got 0")
			}
		case "shard":
			ferr = decodeField(raw, key, "a shard index (an integer ≥ 0)", &q.Shard)
			if ferr == nil && q.Shard < 0 {
				ferr = invalid("field \"shard\" must be a shard index (an integer ≥ 0), got %d", q.Shard)
			}
			q.HasShard = true
		default:
			return nil, 0, invalid("unknown field %q (known: %s)", truncate(key, 64), strings.Join(ticketFields, ", "))
		}
		if ferr != nil {
			return nil, 0, ferr
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, 0, invalid("not JSON: %s", jsonMsg(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, 0, invalid("trailing data after the JSON object")
	}

	return q, seen, nil
}

// checkTicket checks a decoded ticket as a whole and resolves its periods.
func checkTicket(q *Query, seen fieldSet, maxSeries int) (*Query, error) {
	hasDataset, hasSeries := seen.has("dataset"), seen.has("series")
	if !hasDataset {
		return nil, invalid("missing field \"dataset\"")
	}
	if err := manifest.ValidateDatasetName(q.Dataset); err != nil {
		return nil, invalid("%v", err)
	}
	n := 0
	for _, has := range []bool{hasSeries, q.HasPrefix, q.HasCategory} {
		if has {
			n++
		}
	}
	switch {
	case n == 0:
		return nil, invalid("say which series: one of \"series\" (a list of ids), \"prefix\" (\"\" for all) or \"category\"")
	case n > 1:
		return nil, invalid("give only one of \"series\", \"prefix\" and \"category\"")
	}
	if q.Vintage != 0 && q.Snapshot != 0 {
		return nil, invalid("give \"vintage\" (read that vintage) or \"snapshot\" (require the served one), not both")
	}
	if q.Vintage != 0 && q.HasShard {
		return nil, invalid("\"vintage\" reads one dataset's vintage; a shard's vintages are its own: name the shard's dataset")
	}
	if hasSeries {
		if len(q.Series) == 0 {
			return nil, invalid("\"series\" is empty; list at least one id")
		}
		if maxSeries > 0 && len(q.Series) > maxSeries {
			return nil, errf(codes.ResourceExhausted, "ticket: %d series requested, limit %d per request", len(q.Series), maxSeries)
		}
	}
	if seen.has("start") {
		d, err := period.Parse(q.Start)
		if err != nil {
			return nil, invalid("start: %v", err)
		}
		q.From = d
	}
	if seen.has("end") {
		d, err := period.End(q.End)
		if err != nil {
			return nil, invalid("end: %v", err)
		}
		q.To = d
	}
	if q.From > q.To {
		return nil, invalid("start %q (%s) is after end %q (%s)", q.Start, period.Format(q.From), q.End, period.Format(q.To))
	}
	return q, nil
}

// decodeField unmarshals one value and rewrites encoding/json's type errors
// into a message naming the field and the expected type.
func decodeField(raw json.RawMessage, key, want string, dst any) *Error {
	if err := json.Unmarshal(raw, dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return invalid("field %q must be %s, got %s", key, want, te.Value)
		}
		return invalid("field %q: %s", key, jsonMsg(err))
	}
	return nil
}

// decodeStrings decodes an array of strings, refusing null elements (which
// encoding/json would silently turn into "").
func decodeStrings(raw json.RawMessage, key string) ([]string, *Error) {
	var elems []json.RawMessage
	if err := decodeField(raw, key, "an array of strings", &elems); err != nil {
		return nil, err
	}
	out := make([]string, len(elems))
	for i, e := range elems {
		if bytes.Equal(e, []byte("null")) {
			return nil, invalid("field %q: element %d is null", key, i)
		}
		if err := json.Unmarshal(e, &out[i]); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return nil, invalid("field %q: element %d must be a string, got %s", key, i, te.Value)
			}
			return nil, invalid("field %q: element %d: %s", key, i, jsonMsg(err))
		}
	}
	return out, nil
}

func jsonMsg(err error) string {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return "unexpected end of input"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func describeToken(tok any) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			return "an array"
		}
		return fmt.Sprintf("%q", string(t))
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	default:
		return "a number"
	}
}

func truncate(s string, n int) string { return query.Truncate(s, n) }

// checkSurrogates refuses a JSON string escape that is half a UTF-16
// surrogate pair (\ud800 alone, or a low half first). encoding/json
// decodes one to U+FFFD without a word, so a series id or a prefix with
// one would silently become another string; like invalid UTF-8, it is an
// InvalidArgument naming where it is.
func checkSurrogates(b []byte) error {
	inStr := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !inStr {
			inStr = c == '"'
			continue
		}
		switch c {
		case '"':
			inStr = false
		case '\\':
			r, ok := hexEscape(b, i)
			if !ok {
				i++ // another escape (or a malformed one, which the decoder reports)
				continue
			}
			switch {
			case r >= 0xd800 && r < 0xdc00:
				if lo, ok := hexEscape(b, i+6); ok && lo >= 0xdc00 && lo < 0xe000 {
					i += 11
					continue
				}
				return invalid("lone surrogate \\u%04x at byte %d (a high half with no low half after it): strings must be valid Unicode", r, i)
			case r >= 0xdc00 && r < 0xe000:
				return invalid("lone surrogate \\u%04x at byte %d (a low half with no high half before it): strings must be valid Unicode", r, i)
			}
			i += 5
		}
	}
	return nil
}

// hexEscape decodes the \uXXXX escape at b[i:], if there is one.
func hexEscape(b []byte, i int) (rune, bool) {
	if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
		return 0, false
	}
	var r rune
	for _, h := range b[i+2 : i+6] {
		switch {
		case h >= '0' && h <= '9':
			r = r<<4 | rune(h-'0')
		case h >= 'a' && h <= 'f':
			r = r<<4 | rune(h-'a'+10)
		case h >= 'A' && h <= 'F':
			r = r<<4 | rune(h-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
