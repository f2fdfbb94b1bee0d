package serve

// Bearer tokens and what each may do (docs/FLIGHT.md "Authentication").
//
// A token line is
//
//	TOKEN [scopes=read[,write][,admin]] [datasets=A[,B…]]
//
// fields separated by spaces or tabs, the token first, the others in any
// order and each at most once. Without scopes= a token has every scope,
// without datasets= every dataset: a bare TOKEN line is a full-access
// token. Tokens are compared in constant time (tokenSet.lookup).

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/energyscope/servingsnap/pkg/manifest"
)

// Scope is a set of permissions a token carries.
type Scope uint8

// The scopes: read (every query, listing and description, the status
// action and Flight SQL), write (DoPut of rows), admin (the actions that
// change what is served: reload, compact, discard).
const (
	ScopeRead Scope = 1 << iota
	ScopeWrite
	ScopeAdmin

	ScopeAll = ScopeRead | ScopeWrite | ScopeAdmin
)

var scopeNames = []struct {
	s    Scope
	name string
}{{ScopeRead, "read"}, {ScopeWrite, "write"}, {ScopeAdmin, "admin"}}

// String is the scopes as a token line writes them: "read,write"; "none"
// for the empty set.
func (s Scope) String() string {
	var names []string
	for _, n := range scopeNames {
		if s&n.s != 0 {
			names = append(names, n.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// Grant is what one token may do: its scopes, on which datasets.
type Grant struct {
	Scopes Scope
	// Datasets the token may name, sorted; nil: every dataset. A sharded
	// dataset's name also permits its shard datasets (PET permits
	// PET.shard-0000 …).
	Datasets []string
}

// fullGrant is a bare token's: every scope, every dataset.
var fullGrant = Grant{Scopes: ScopeAll}

// Has reports whether the grant carries every scope of s.
func (g Grant) Has(s Scope) bool { return g.Scopes&s == s }

// Permits reports whether the grant lets the token name dataset name.
func (g Grant) Permits(name string) bool {
	if g.Datasets == nil {
		return true
	}
	if _, ok := slices.BinarySearch(g.Datasets, name); ok {
		return true
	}
	if base, ok := shardBase(name); ok {
		_, ok = slices.BinarySearch(g.Datasets, base)
		return ok
	}
	return false
}

// shardBase is the sharded dataset a shard dataset's name belongs to:
// "PET" for "PET.shard-0001" (shard.DirName).
func shardBase(name string) (string, bool) {
	i := strings.LastIndex(name, ".shard-")
	if i <= 0 {
		return "", false
	}
	digits := name[i+len(".shard-"):]
	if len(digits) < 4 {
		return "", false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return name[:i], true
}

// String is the grant as the fields of a token line.
func (g Grant) String() string {
	s := "scopes=" + g.Scopes.String()
	if g.Datasets != nil {
		s += " datasets=" + strings.Join(g.Datasets, ",")
	}
	return s
}

// TokenLine is one token of a token file or variable, with where it was
// written (for error messages; never the token itself).
type TokenLine struct {
	Token  string
	Grant  Grant
	Source string // the file, or "$NAME" for an environment variable
	Line   int    // 1-based line (entry, for a variable) in Source
}

// MinTokenLength is the shortest token accepted.
const MinTokenLength = 16

// maxTokenLine bounds one line of a token file.
const maxTokenLine = 1 << 20

// ParseTokens reads token lines from text (source names it in errors).
// Lines are separated by newlines, and with semicolons also by ';' (the
// form of an environment variable, where newlines are awkward). Blank
// lines and lines starting with # are skipped. A malformed line is an
// error naming source and line; so is a token given twice, and text with
// no token at all.
func ParseTokens(source string, text []byte, semicolons bool) ([]TokenLine, error) {
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), maxTokenLine)
	if semicolons {
		sc.Split(splitLinesOrSemicolons)
	}
	var out []TokenLine
	first := map[[sha256.Size]byte]int{}
	n := 1
	for ; sc.Scan(); n++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		tl, err := parseTokenLine(s)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", source, n, err)
		}
		sum := sha256.Sum256([]byte(tl.Token))
		if at, dup := first[sum]; dup {
			return nil, fmt.Errorf("%s:%d: the same token as line %d (each token once; give it every scope and dataset it needs)", source, n, at)
		}
		first[sum] = n
		tl.Source, tl.Line = source, n
		out = append(out, tl)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w (a line is at most %d bytes)", source, n, err, maxTokenLine)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no tokens (one a line: TOKEN [scopes=read,write,admin] [datasets=A,B]; # starts a comment)", source)
	}
	return out, nil
}

// splitLinesOrSemicolons is bufio.ScanLines with ';' a separator too.
func splitLinesOrSemicolons(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexAny(data, "\n;"); i >= 0 {
		return i + 1, bytes.TrimSuffix(data[:i], []byte("\r")), nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// parseTokenLine parses one non-blank, non-comment line.
func parseTokenLine(s string) (TokenLine, error) {
	fields := strings.Fields(s)
	tl := TokenLine{Token: fields[0], Grant: fullGrant}
	if k, _, ok := strings.Cut(tl.Token, "="); ok && (k == "scopes" || k == "datasets") {
		return tl, fmt.Errorf("the line starts with %s=: the token comes first (TOKEN [scopes=…] [datasets=…])", k)
	}
	if len(tl.Token) < MinTokenLength {
		return tl, fmt.Errorf("token is %d characters, want at least %d (e.g. `openssl rand -hex 32`)", len(tl.Token), MinTokenLength)
	}
	seen := map[string]bool{}
	for _, f := range fields[1:] {
		key, val, ok := strings.Cut(f, "=")
		if !ok || (key != "scopes" && key != "datasets") {
			return tl, fmt.Errorf("field %q: want scopes=… or datasets=… after the token (a token holds no spaces)", truncate(f, 64))
		}
		if seen[key] {
			return tl, fmt.Errorf("%s= given twice", key)
		}
		seen[key] = true
		items := strings.Split(val, ",")
		if val == "" || slices.Contains(items, "") {
			return tl, fmt.Errorf("%s=%q: want a comma-separated list without empty elements", key, truncate(val, 64))
		}
		switch key {
		case "scopes":
			tl.Grant.Scopes = 0
			for _, it := range items {
				sc, ok := parseScope(it)
				if !ok {
					return tl, fmt.Errorf("unknown scope %q: want read, write or admin", truncate(it, 64))
				}
				tl.Grant.Scopes |= sc
			}
		case "datasets":
			for _, it := range items {
				if err := manifest.ValidateDatasetName(it); err != nil {
					return tl, fmt.Errorf("datasets=: %w", err)
				}
			}
			slices.Sort(items)
			tl.Grant.Datasets = slices.Compact(items)
		}
	}
	return tl, nil
}

func parseScope(s string) (Scope, bool) {
	for _, n := range scopeNames {
		if s == n.name {
			return n.s, true
		}
	}
	return 0, false
}

// ReadTokenLines reads the token lines of a file.
func ReadTokenLines(path string) ([]TokenLine, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseTokens(path, b, false)
}

// EnvTokenLines reads the token lines of environment variable name: the
// lines of a token file, separated by newlines or ';'.
func EnvTokenLines(name string) ([]TokenLine, error) {
	v, ok := os.LookupEnv(name)
	if !ok {
		return nil, fmt.Errorf("environment variable %s is not set", name)
	}
	return ParseTokens("$"+name, []byte(v), true)
}

// Tokens is a set of accepted bearer tokens and their grants, compared in
// constant time: each candidate is hashed (SHA-256, so lengths leak
// nothing) and compared with every token's hash without stopping at the
// first match.
type Tokens struct {
	sums   [][sha256.Size]byte
	grants []Grant
}

// NewTokenSet makes a token set of parsed lines, from one or several
// sources; a token given twice is an error naming both places.
func NewTokenSet(lines ...TokenLine) (*Tokens, error) {
	t := &Tokens{}
	where := map[[sha256.Size]byte]TokenLine{}
	for _, l := range lines {
		if l.Token == "" {
			return nil, fmt.Errorf("%s:%d: empty token", l.Source, l.Line)
		}
		sum := sha256.Sum256([]byte(l.Token))
		if p, dup := where[sum]; dup {
			return nil, fmt.Errorf("%s:%d: the same token as %s:%d (each token once)", l.Source, l.Line, p.Source, p.Line)
		}
		where[sum] = l
		t.sums = append(t.sums, sum)
		t.grants = append(t.grants, l.Grant)
	}
	if len(t.sums) == 0 {
		return nil, fmt.Errorf("no tokens")
	}
	return t, nil
}

// NewTokens makes a set of full-access tokens; empty tokens are refused.
func NewTokens(tokens ...string) (*Tokens, error) {
	lines := make([]TokenLine, len(tokens))
	for i, tok := range tokens {
		lines[i] = TokenLine{Token: tok, Grant: fullGrant, Source: "token", Line: i + 1}
	}
	return NewTokenSet(lines...)
}

// ReadTokenFile reads a token file (ReadTokenLines) into a set.
func ReadTokenFile(path string) (*Tokens, error) {
	lines, err := ReadTokenLines(path)
	if err != nil {
		return nil, err
	}
	return NewTokenSet(lines...)
}

// Lookup is the grant of tok, in time independent of which token (if
// any) matches and of their lengths.
func (t *Tokens) Lookup(tok string) (Grant, bool) {
	sum := sha256.Sum256([]byte(tok))
	found, at := 0, 0
	for i := range t.sums {
		eq := subtle.ConstantTimeCompare(sum[:], t.sums[i][:])
		at = subtle.ConstantTimeSelect(eq, i, at)
		found |= eq
	}
	if found != 1 {
		return Grant{}, false
	}
	return t.grants[at], true
}

// Valid reports whether tok is one of the tokens (Lookup).
func (t *Tokens) Valid(tok string) bool {
	_, ok := t.Lookup(tok)
	return ok
}
