package serve

// What a client is told of a failure, and what the log keeps.
//
// Errors of the lower layers name files by their absolute paths (a WAL
// segment, a CURRENT, a staging directory), which is what an operator
// needs and what a client must not see. callMiddleware, the outermost
// middleware, gives every failed call a request id, logs the status
// message in full with it, and sends the client the message with the
// served root cut away (a path below it becomes relative to it, so it
// starts with the dataset's name) and, for a failure of the server's
// own, any other absolute path cut to its last element; the client's
// message ends with the same request id, so an operator can find the
// log line a client quotes.

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// redactor removes the served root from what clients are sent.
type redactor struct {
	roots []string // the root as given, absolute and with symlinks resolved; longest first
}

func newRedactor(root string) *redactor {
	r := &redactor{}
	add := func(p string) {
		p = filepath.Clean(p)
		// A bare relative name ("snapshots") could be any word of a
		// message: only a path with a separator is cut.
		if p != "/" && p != "." && strings.ContainsRune(p, filepath.Separator) && !slices.Contains(r.roots, p) {
			r.roots = append(r.roots, p)
		}
	}
	if root == "" {
		return r
	}
	add(root)
	if abs, err := filepath.Abs(root); err == nil {
		add(abs)
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			add(real)
		}
	}
	slices.SortFunc(r.roots, func(a, b string) int { return len(b) - len(a) })
	return r
}

// text is s with every path below the root made relative to it and the
// root itself written <root>.
func (r *redactor) text(s string) string {
	for _, p := range r.roots {
		if strings.Contains(s, p) {
			s = strings.ReplaceAll(s, p+string(filepath.Separator), "")
			s = strings.ReplaceAll(s, p, "<root>")
		}
	}
	return s
}

// serverSide reports whether a status code says the server failed (as
// opposed to refusing the client's request): then no absolute path of
// any kind stays in the message.
func serverSide(c codes.Code) bool {
	switch c {
	case codes.Internal, codes.Unknown, codes.DataLoss, codes.Unavailable, codes.FailedPrecondition, codes.Aborted:
		return true
	}
	return false
}

// message is the client's form of a status message of code c.
func (r *redactor) message(c codes.Code, msg string) string {
	msg = r.text(msg)
	if serverSide(c) {
		msg = cutAbsPaths(msg)
	}
	return msg
}

// cutAbsPaths shortens each absolute path of two or more elements in s
// (one that starts a word, or follows a quote, a bracket, = or :) to …/
// and its last element; a URL's //host/… is left alone.
func cutAbsPaths(s string) string {
	if !strings.Contains(s, "/") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '/' || i > 0 && !strings.ContainsRune(" \t\n\"'([=:,", rune(s[i-1])) {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i + 1
		for j < len(s) && pathByte(s[j]) {
			j++
		}
		p := strings.TrimRight(s[i:j], "/.")
		if strings.Count(p, "/") < 2 || strings.HasPrefix(p, "//") { // "//host/…" is a URL's
			b.WriteString(s[i:j])
		} else {
			b.WriteString("…/" + p[strings.LastIndexByte(p, '/')+1:])
			b.WriteString(s[i+len(p) : j])
		}
		i = j
	}
	return b.String()
}

func pathByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("/._-+@~", c) >= 0
}

// requestIDs number the calls that fail: a random prefix per process and
// a counter, so ids from two runs of the server never collide.
type requestIDs struct {
	prefix uint32
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [4]byte
	rand.Read(b[:])
	return &requestIDs{prefix: binary.LittleEndian.Uint32(b[:])}
}

func (g *requestIDs) next() string { return fmt.Sprintf("%08x-%d", g.prefix, g.n.Add(1)) }

// clientError is err as the client gets it: the message redacted and
// ending with the request id, code and details kept. redacted reports
// whether the redaction changed the message.
func (r *redactor) clientError(err error, id string) (out error, redacted bool) {
	st := status.Convert(err)
	p := st.Proto()
	msg := r.message(st.Code(), p.Message)
	redacted = msg != p.Message
	p.Message = msg + " [request " + id + "]"
	return status.FromProto(p).Err(), redacted
}
