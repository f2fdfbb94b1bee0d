package sqlq

import (
	"fmt"
	"strings"

	"github.com/energyscope/servingsnap/pkg/query"
)

// tokKind is the kind of one lexical token.
type tokKind uint8

const (
	tokEOF    tokKind = iota
	tokIdent          // bare identifier or keyword (text as written)
	tokQuoted         // "quoted identifier" (text unquoted)
	tokString         // 'string literal' (text unquoted)
	tokNumber         // unsigned decimal integer
	tokParam          // ?
	tokPunct          // * , ( ) = < > <= >= ; .
)

type token struct {
	kind tokKind
	text string
	pos  int // byte offset in the statement
}

// maxStatement bounds the statement text: a ticket-sized limit, so a
// statement never costs more to parse than a ticket.
const maxStatement = 1 << 20

// lex splits s into tokens, ending with tokEOF.
func lex(s string) ([]token, error) {
	if len(s) > maxStatement {
		return nil, invalid("statement is %d bytes, limit %d", len(s), maxStatement)
	}
	var out []token
	i := 0
	for {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i+1 < len(s) && s[i] == '-' && s[i+1] == '-' { // -- comment to end of line
			for i < len(s) && s[i] != '\n' {
				i++
			}
			continue
		}
		if i >= len(s) {
			return append(out, token{kind: tokEOF, pos: i}), nil
		}
		start := i
		c := s[i]
		switch {
		case isIdentStart(c):
			for i < len(s) && isIdentPart(s[i]) {
				i++
			}
			out = append(out, token{kind: tokIdent, text: s[start:i], pos: start})
		case c >= '0' && c <= '9':
			for i < len(s) && s[i] >= '0' && s[i] <= '9' {
				i++
			}
			if i < len(s) && isIdentPart(s[i]) {
				return nil, invalid("bad number at offset %d", start)
			}
			out = append(out, token{kind: tokNumber, text: s[start:i], pos: start})
		case c == '\'' || c == '"':
			text, n, ok := unquote(s[i:], c)
			if !ok {
				return nil, invalid("unterminated %c quote at offset %d", c, start)
			}
			i += n
			k := tokString
			if c == '"' {
				k = tokQuoted
			}
			out = append(out, token{kind: k, text: text, pos: start})
		case c == '?':
			i++
			out = append(out, token{kind: tokParam, text: "?", pos: start})
		case c == '<' || c == '>':
			i++
			if i < len(s) && s[i] == '=' {
				i++
			}
			out = append(out, token{kind: tokPunct, text: s[start:i], pos: start})
		case strings.IndexByte("*,()=;.", c) >= 0:
			i++
			out = append(out, token{kind: tokPunct, text: s[start:i], pos: start})
		default:
			return nil, invalid("unexpected character %q at offset %d", rune(c), start)
		}
	}
}

// unquote reads a quoted token at the start of s (q doubled inside stands
// for itself) and returns its text and length.
func unquote(s string, q byte) (string, int, bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != q {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == q {
			b.WriteByte(q)
			i++
			continue
		}
		return b.String(), i + 1, true
	}
	return "", 0, false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

func isIdentStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }

func isIdentPart(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// invalid is a statement error: ErrInvalid with what is supported.
func invalid(format string, a ...any) error {
	return query.Errorf(query.ErrInvalid, "sql: %s; %s", fmt.Sprintf(format, a...), Supported)
}

// Supported is the grammar, as error messages state it. It holds no
// percent sign: the ADBC Flight SQL driver (1.13) formats server messages
// as format strings, which garbles one.
const Supported = "supported: SELECT * | col, ... | agg, ... FROM [catalog.schema.]dataset | latest(dataset) [FOR VERSION AS OF snapshot-id] " +
	"[WHERE series_id = 'id' | series_id IN ('a', ...) | series_id LIKE 'PREFIX<percent sign>' | category = 'c' " +
	"[AND period >= | <= | > | < | = 'period' | AND period BETWEEN 'a' AND 'b']] " +
	"[ORDER BY series_id, period] [LIMIT n]; agg: count(*) | count(DISTINCT series_id) | min(period) | max(period) [AS name]; " +
	"bare names match in any case, \"quoted\" ones exactly (quote names holding . or -: \"PET-1\"); ? for a bound parameter in place of any literal"
