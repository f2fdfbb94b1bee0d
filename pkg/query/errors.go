package query

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// Sentinels of the read layer. Every error a Plan returns for a request
// the client could correct wraps exactly one of them; anything else
// (corruption, I/O) is the server's problem.
var (
	// ErrNotFound: a named series, category or dataset does not exist.
	// It is snapshot.ErrNotFound, the one not-found sentinel.
	ErrNotFound = snapshot.ErrNotFound
	// ErrInvalid: the request is malformed (unknown column, no category
	// attribute, a bound after the other).
	ErrInvalid = errors.New("invalid request")
	// ErrLimit: the request is well formed but larger than a limit allows.
	ErrLimit = errors.New("limit exceeded")
	// ErrStale: the request names a snapshot other than the one served.
	ErrStale = errors.New("snapshot not served")
)

// Error is a request error: a message written for the client (it names
// the field, the dataset and the snapshot) and the sentinel it is.
type Error struct {
	Kind error // one of the sentinels above
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Unwrap makes errors.Is(err, ErrNotFound) and the like work.
func (e *Error) Unwrap() error { return e.Kind }

// Errorf builds an Error of the given kind.
func Errorf(kind error, format string, a ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, a...)}
}

// Truncate shortens s to at most n bytes at a rune boundary, marking the
// cut with "…": client-supplied strings are echoed in messages, never
// whole.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// quoteSome quotes up to show strings, then "…".
func quoteSome(ss []string, show int) string {
	q := make([]string, 0, show+1)
	for i, s := range ss {
		if i == show {
			q = append(q, "…")
			break
		}
		q = append(q, strconv.Quote(Truncate(s, 128)))
	}
	return strings.Join(q, ", ")
}
