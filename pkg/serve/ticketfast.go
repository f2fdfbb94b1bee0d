package serve

import (
	"math"
	"slices"
	"unsafe"
)

// parseTicketFast decodes the tickets clients send most, without
// encoding/json's per-token allocations: one object of the known fields,
// each once, whose strings have no escapes and whose integers are plain
// positive decimals (shard: ≥ 0). It reports !ok for anything else (any
// mistake included), which parseTicketJSON then decodes and explains. Where
// it accepts a ticket, its Query is parseTicketJSON's. b is valid UTF-8.
//
// The Query's strings are views of b, not copies (a latest-values ticket
// names a thousand ids: a string each was half of what such a request
// allocated), so b must not change while the Query is in use; ParseTicket
// says so to its callers.
func parseTicketFast(b []byte) (q *Query, seen fieldSet, ok bool) {
	p := fastScanner{b: b, s: unsafe.String(unsafe.SliceData(b), len(b))}
	if !p.byte('{') {
		return nil, 0, false
	}
	q = &Query{From: math.MinInt32, To: math.MaxInt32}
	for {
		key, ok := p.str()
		if !ok || !p.byte(':') {
			return nil, 0, false
		}
		i := slices.Index(ticketFields, string(key)) // no allocation: compiler-optimised conversion
		if i < 0 || seen&(1<<i) != 0 {
			return nil, 0, false
		}
		seen |= 1 << i
		switch ticketFields[i] {
		case "dataset":
			ok = p.strInto(&q.Dataset)
		case "prefix":
			ok = p.strInto(&q.Prefix)
			q.HasPrefix = true
		case "category":
			ok = p.strInto(&q.Category)
			q.HasCategory = true
		case "start":
			ok = p.strInto(&q.Start)
		case "end":
			ok = p.strInto(&q.End)
		case "series":
			q.Series, ok = p.strs()
		case "columns":
			q.Columns, ok = p.strs()
			q.HasColumns = true
		case "attributes":
			q.Attributes, ok = p.boolean()
		case "latest":
			q.Latest, ok = p.boolean()
		case "limit":
			var n uint64
			n, ok = p.uint()
			ok = ok && n > 0
			q.Limit = int64(n)
		case "snapshot":
			q.Snapshot, ok = p.uint()
			ok = ok && q.Snapshot > 0
		case "vintage":
			q.Vintage, ok = p.uint()
			ok = ok && q.Vintage > 0
		case "shard":
			var n uint64
			n, ok = p.uint()
			ok = ok && n <= math.MaxInt32
			q.Shard, q.HasShard = int(n), true
		default:
			return nil, 0, false
		}
		if !ok {
			return nil, 0, false
		}
		if p.byte(',') {
			continue
		}
		if !p.byte('}') || !p.end() {
			return nil, 0, false
		}
		return q, seen, true
	}
}

// fastScanner reads the subset of JSON parseTicketFast accepts.
type fastScanner struct {
	b []byte
	s string // b's bytes, not copied: the strings it returns are views of b
	i int
}

func (p *fastScanner) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// byte consumes c after optional white space.
func (p *fastScanner) byte(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (p *fastScanner) end() bool {
	p.space()
	return p.i == len(p.b)
}

// str reads a string without escapes or control characters, returning
// its bytes (a view of b).
func (p *fastScanner) str() ([]byte, bool) {
	lo, hi, ok := p.span()
	return p.b[lo:hi], ok
}

// span reads a string without escapes or control characters, returning
// where its contents are in b.
func (p *fastScanner) span() (lo, hi int, ok bool) {
	if !p.byte('"') {
		return 0, 0, false
	}
	for j := p.i; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			lo, hi = p.i, j
			p.i = j + 1
			return lo, hi, true
		case c == '\\' || c < 0x20:
			return 0, 0, false
		}
	}
	return 0, 0, false
}

func (p *fastScanner) strInto(dst *string) bool {
	lo, hi, ok := p.span()
	*dst = p.s[lo:hi]
	return ok
}

// strs reads an array of strings; [] is an empty, non-nil slice. The
// slice is sized once, from the quotes before the array's end.
func (p *fastScanner) strs() ([]string, bool) {
	if !p.byte('[') {
		return nil, false
	}
	out := make([]string, 0, p.countStrings())
	if p.byte(']') {
		return out, true
	}
	for {
		lo, hi, ok := p.span()
		if !ok {
			return nil, false
		}
		out = append(out, p.s[lo:hi])
		if p.byte(',') {
			continue
		}
		return out, p.byte(']')
	}
}

// countStrings counts the strings from here to the first ']' outside one
// (at least 1, a capacity: a malformed array is found by strs itself).
func (p *fastScanner) countStrings() int {
	n, in := 0, false
	for _, c := range p.b[p.i:] {
		switch {
		case c == '"':
			in = !in
			if in {
				n++
			}
		case c == ']' && !in:
			return max(n, 1)
		}
	}
	return max(n, 1)
}

func (p *fastScanner) boolean() (v, ok bool) {
	p.space()
	rest := p.b[p.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		p.i += 4
		return true, p.delim()
	case len(rest) >= 5 && string(rest[:5]) == "false":
		p.i += 5
		return false, p.delim()
	}
	return false, false
}

// uint reads a decimal integer of at most 18 digits without a sign,
// exponent, fraction or leading zero.
func (p *fastScanner) uint() (uint64, bool) {
	p.space()
	j := p.i
	var n uint64
	for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
		n = n*10 + uint64(p.b[j]-'0')
		j++
	}
	digits := j - p.i
	if digits == 0 || digits > 18 || (digits > 1 && p.b[p.i] == '0') {
		return 0, false
	}
	p.i = j
	return n, p.delim()
}

// delim reports whether a literal ended where JSON lets it end (so that
// "truex" or "12.5" are not taken as true or 12).
func (p *fastScanner) delim() bool {
	if p.i == len(p.b) {
		return true
	}
	switch p.b[p.i] {
	case ' ', '\t', '\n', '\r', ',', '}', ']':
		return true
	}
	return false
}
