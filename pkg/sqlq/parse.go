package sqlq

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/energyscope/servingsnap/pkg/query"
)

// Operand is a literal or a positional parameter (?), bound by Bind.
type Operand struct {
	Lit   string
	Param int // 1-based position of the ?, 0 for a literal
}

// Selector kinds of a WHERE clause.
const (
	SelAll      = ""         // no selector: every series
	SelEqual    = "="        // series_id = x
	SelIn       = "IN"       // series_id IN (x, ...)
	SelLike     = "LIKE"     // series_id LIKE 'prefix%'
	SelCategory = "category" // category = x
)

// PeriodCond is one comparison of period with an operand: Op is one of
// >= <= > < =.
type PeriodCond struct {
	Op string
	X  Operand
}

// Ident is an identifier as written. A bare one stands for any name that
// equals it ignoring case; a quoted one ("Name") for exactly its text.
type Ident struct {
	Name   string
	Quoted bool
}

// Resolve finds the name among names that id stands for: the one equal
// to it, else for a bare identifier the one equal to it ignoring case.
// ok is false when there is none; two names equal ignoring case and
// neither equal to a bare id is an ErrInvalid naming them.
func (id Ident) Resolve(names []string) (name string, ok bool, err error) {
	var folded []string
	for _, n := range names {
		if n == id.Name {
			return n, true, nil
		}
		if !id.Quoted && strings.EqualFold(n, id.Name) {
			folded = append(folded, n)
		}
	}
	switch len(folded) {
	case 0:
		return "", false, nil
	case 1:
		return folded[0], true, nil
	}
	return "", false, query.Errorf(query.ErrInvalid, "sql: %s is ambiguous: it matches %s ignoring case; quote the one meant (\"%s\")",
		query.Truncate(id.Name, 128), strings.Join(folded, ", "), folded[0])
}

func (id Ident) String() string {
	if !id.Quoted && bare(id.Name) {
		return id.Name
	}
	return quoteIdent(id.Name)
}

// bare reports whether s reads back as the bare identifier s.
func bare(s string) bool {
	if s == "" || !isIdentStart(s[0]) || reserved(s) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentPart(s[i]) {
			return false
		}
	}
	return true
}

// Aggregate functions of the select list.
const (
	AggCount = "count"
	AggMin   = "min"
	AggMax   = "max"
)

// Agg is an aggregate of the select list: count(*), count(series_id),
// count(period), count(DISTINCT series_id), min(period), max(period).
type Agg struct {
	Func     string // one of the Agg* functions
	Arg      string // "*", query.ColSeriesID or query.ColPeriod
	Distinct bool
	// Name is the answer's column: the AS alias, else the expression as
	// Expr writes it.
	Name string
}

// Expr is the aggregate as SQL, canonically: count(DISTINCT series_id).
func (a Agg) Expr() string {
	if a.Distinct {
		return a.Func + "(DISTINCT " + a.Arg + ")"
	}
	return a.Func + "(" + a.Arg + ")"
}

// Statement is a parsed statement, parameters unbound.
type Statement struct {
	// Catalog and Schema qualify Table when written (catalog.schema.table,
	// schema.table); empty names when not. Parse does not check them: the
	// server knows its catalog.
	Catalog, Schema Ident
	Table           Ident
	Latest          bool    // FROM latest(dataset)
	Star            bool    // SELECT *
	Columns         []Ident // SELECT col, ... (when not Star, nor aggregates)
	Aggs            []Agg   // SELECT count(*), ...: a one-row answer
	Sel             string  // one of the Sel* kinds
	SelArgs         []Operand
	Periods         []PeriodCond // ANDed (BETWEEN is a >= and a <=)
	Ordered         bool         // ORDER BY series_id[, period] (the natural order)
	HasLimit        bool
	Limit           Operand
	Params          int // number of ? in the statement
	// Vintage is FOR VERSION AS OF N after the dataset: read retained
	// vintage N as published (0: the served snapshot).
	Vintage uint64
}

// Parse parses one statement of the grammar (see Supported). Any other
// statement is an error wrapping query.ErrInvalid. It never panics.
func Parse(sql string) (*Statement, error) {
	toks, err := lex(sql)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	st, err := p.statement()
	if err != nil {
		return nil, err
	}
	return st, nil
}

type parser struct {
	toks []token
	i    int
	st   Statement
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

// isKw reports whether t is the keyword kw (case-insensitive, bare only).
func isKw(t token, kw string) bool { return t.kind == tokIdent && strings.EqualFold(t.text, kw) }

func (p *parser) acceptKw(kw string) bool {
	if isKw(p.peek(), kw) {
		p.i++
		return true
	}
	return false
}

func (p *parser) accept(punct string) bool {
	if t := p.peek(); t.kind == tokPunct && t.text == punct {
		p.i++
		return true
	}
	return false
}

func (p *parser) expectKw(kw string) error {
	if !p.acceptKw(kw) {
		return p.unexpected("expected " + kw)
	}
	return nil
}

func (p *parser) expect(punct string) error {
	if !p.accept(punct) {
		return p.unexpected("expected " + strconv.Quote(punct))
	}
	return nil
}

func (p *parser) unexpected(what string) error {
	t := p.peek()
	if t.kind == tokEOF {
		return invalid("%s at the end of the statement", what)
	}
	return invalid("%s at offset %d, found %s", what, t.pos, describe(t))
}

func describe(t token) string {
	switch t.kind {
	case tokString:
		return "string " + strconv.Quote(query.Truncate(t.text, 64))
	case tokQuoted:
		return "identifier " + strconv.Quote(query.Truncate(t.text, 64))
	default:
		return strconv.Quote(query.Truncate(t.text, 64))
	}
}

// ident reads a bare or quoted identifier.
func (p *parser) ident(what string) (Ident, error) {
	t := p.peek()
	if t.kind == tokQuoted || t.kind == tokIdent && !reserved(t.text) {
		p.i++
		return Ident{Name: t.text, Quoted: t.kind == tokQuoted}, nil
	}
	return Ident{}, p.unexpected("expected " + what)
}

func reserved(s string) bool {
	switch strings.ToUpper(s) {
	case "SELECT", "FROM", "WHERE", "AND", "OR", "NOT", "IN", "LIKE", "BETWEEN", "ORDER", "BY", "LIMIT", "ASC", "DESC", "GROUP", "JOIN", "UNION", "OFFSET", "HAVING", "FOR", "AS", "DISTINCT":
		return true
	}
	return false
}

// operand reads a string literal, DATE 'literal', a number or ?.
func (p *parser) operand(what string) (Operand, error) {
	t := p.peek()
	switch {
	case t.kind == tokString, t.kind == tokNumber:
		p.i++
		return Operand{Lit: t.text}, nil
	case t.kind == tokParam:
		p.i++
		p.st.Params++
		return Operand{Param: p.st.Params}, nil
	case isKw(t, "DATE") && p.toks[p.i+1].kind == tokString:
		p.i += 2
		return Operand{Lit: p.toks[p.i-1].text}, nil
	}
	return Operand{}, p.unexpected("expected " + what + " (a quoted string or ?)")
}

func (p *parser) statement() (*Statement, error) {
	if err := p.expectKw("SELECT"); err != nil {
		return nil, err
	}
	if err := p.selectList(); err != nil {
		return nil, err
	}
	if err := p.expectKw("FROM"); err != nil {
		return nil, err
	}
	if err := p.source(); err != nil {
		return nil, err
	}
	if p.acceptKw("FOR") {
		if err := p.vintage(); err != nil {
			return nil, err
		}
	}
	if p.acceptKw("WHERE") {
		if err := p.where(); err != nil {
			return nil, err
		}
	}
	if p.acceptKw("ORDER") {
		if len(p.st.Aggs) > 0 {
			return nil, invalid("ORDER BY does not apply to an aggregate's one row")
		}
		if err := p.orderBy(); err != nil {
			return nil, err
		}
	}
	if p.acceptKw("LIMIT") {
		x, err := p.operand("a row count")
		if err != nil {
			return nil, err
		}
		p.st.HasLimit, p.st.Limit = true, x
		if x.Param == 0 {
			if _, err := limitOf(x.Lit); err != nil {
				return nil, err
			}
		}
	}
	p.accept(";")
	if p.peek().kind != tokEOF {
		return nil, p.unexpected("expected the end of the statement")
	}
	return &p.st, nil
}

// selectList reads *, a list of columns, or a list of aggregates (with
// no GROUP BY, columns and aggregates do not mix).
func (p *parser) selectList() error {
	if p.accept("*") {
		p.st.Star = true
		return nil
	}
	for {
		if p.isAggregate() {
			if len(p.st.Columns) > 0 {
				return p.unexpected("columns and aggregates do not mix (there is no GROUP BY)")
			}
			a, err := p.aggregate()
			if err != nil {
				return err
			}
			p.st.Aggs = append(p.st.Aggs, a)
		} else {
			if len(p.st.Aggs) > 0 {
				return p.unexpected("columns and aggregates do not mix (there is no GROUP BY)")
			}
			c, err := p.ident("a column name, an aggregate or *")
			if err != nil {
				return err
			}
			p.st.Columns = append(p.st.Columns, c)
		}
		if !p.accept(",") {
			return nil
		}
	}
}

// isAggregate reports whether a function call starts here.
func (p *parser) isAggregate() bool {
	t, n := p.peek(), p.toks[min(p.i+1, len(p.toks)-1)]
	return t.kind == tokIdent && n.kind == tokPunct && n.text == "("
}

// aggregate reads one aggregate and its optional AS alias.
func (p *parser) aggregate() (Agg, error) {
	fn := p.next()
	p.next() // (
	a := Agg{Func: strings.ToLower(fn.text)}
	switch a.Func {
	case AggCount:
		switch {
		case p.accept("*"):
			a.Arg = "*"
		case p.acceptKw("DISTINCT"):
			if !isColumn(p.peek(), query.ColSeriesID) {
				return a, p.unexpected("only count(DISTINCT series_id) is supported")
			}
			p.i++
			a.Arg, a.Distinct = query.ColSeriesID, true
		case isColumn(p.peek(), query.ColSeriesID), isColumn(p.peek(), query.ColPeriod):
			a.Arg = strings.ToLower(p.next().text)
		default:
			return a, p.unexpected("expected *, DISTINCT series_id, series_id or period in count()")
		}
	case AggMin, AggMax:
		if !isColumn(p.peek(), query.ColPeriod) {
			return a, p.unexpected("only " + a.Func + "(period) is supported")
		}
		p.i++
		a.Arg = query.ColPeriod
	default:
		p.i -= 2
		return a, p.unexpected("only the aggregates count(*), count(DISTINCT series_id), min(period) and max(period) are supported")
	}
	if err := p.expect(")"); err != nil {
		return a, err
	}
	a.Name = a.Expr()
	if p.acceptKw("AS") {
		alias, err := p.ident("a column alias")
		if err != nil {
			return a, err
		}
		a.Name = alias.Name
	}
	return a, nil
}

// vintage reads the rest of FOR VERSION AS OF N (time travel as DuckDB,
// Spark and Trino write it for Iceberg tables, the version being the
// snapshot id).
func (p *parser) vintage() error {
	for _, kw := range []string{"VERSION", "AS", "OF"} {
		if err := p.expectKw(kw); err != nil {
			return err
		}
	}
	t := p.peek()
	id, err := strconv.ParseUint(t.text, 10, 64)
	if t.kind != tokNumber || err != nil || id == 0 {
		return p.unexpected("expected a snapshot id (a positive integer) after FOR VERSION AS OF")
	}
	p.i++
	p.st.Vintage = id
	return nil
}

// source reads `dataset` or `latest(dataset)`.
func (p *parser) source() error {
	if isKw(p.peek(), "latest") && p.toks[p.i+1].kind == tokPunct && p.toks[p.i+1].text == "(" {
		p.i += 2
		p.st.Latest = true
		if err := p.table("a dataset name"); err != nil {
			return err
		}
		return p.expect(")")
	}
	return p.table("a dataset name or latest(dataset)")
}

// table reads a dataset name, optionally qualified by the catalog and
// schema that GetTables reports (catalog.schema.dataset or
// schema.dataset, as SQL tools write it); the server checks them.
func (p *parser) table(what string) error {
	var parts []Ident
	for {
		name, err := p.ident(what)
		if err != nil {
			return err
		}
		parts = append(parts, name)
		if len(parts) == 3 || !p.accept(".") {
			break
		}
	}
	p.st.Table = parts[len(parts)-1]
	switch len(parts) {
	case 3:
		p.st.Catalog, p.st.Schema = parts[0], parts[1]
	case 2:
		p.st.Schema = parts[0]
	}
	return nil
}

// where reads conditions joined by AND: at most one series selector and
// any number of period comparisons.
func (p *parser) where() error {
	for {
		t := p.peek()
		switch {
		case isColumn(t, "series_id"), isColumn(t, "category"):
			if p.st.Sel != SelAll {
				return p.unexpected("only one series condition (series_id or category) is supported")
			}
			if err := p.selector(); err != nil {
				return err
			}
		case isColumn(t, "period"):
			if err := p.period(); err != nil {
				return err
			}
		default:
			return p.unexpected("expected a condition on series_id, category or period")
		}
		if !p.acceptKw("AND") {
			if isKw(p.peek(), "OR") {
				return p.unexpected("OR is not supported")
			}
			return nil
		}
	}
}

func isColumn(t token, name string) bool {
	return t.kind == tokIdent && strings.EqualFold(t.text, name) || t.kind == tokQuoted && t.text == name
}

func (p *parser) selector() error {
	col := p.next()
	if isColumn(col, "category") {
		if err := p.expect("="); err != nil {
			return err
		}
		x, err := p.operand("a category")
		p.st.Sel, p.st.SelArgs = SelCategory, []Operand{x}
		return err
	}
	switch {
	case p.accept("="):
		x, err := p.operand("a series id")
		p.st.Sel, p.st.SelArgs = SelEqual, []Operand{x}
		return err
	case p.acceptKw("IN"):
		if err := p.expect("("); err != nil {
			return err
		}
		p.st.Sel = SelIn
		for {
			x, err := p.operand("a series id")
			if err != nil {
				return err
			}
			p.st.SelArgs = append(p.st.SelArgs, x)
			if !p.accept(",") {
				break
			}
		}
		return p.expect(")")
	case p.acceptKw("LIKE"):
		x, err := p.operand("a pattern 'prefix%'")
		if err != nil {
			return err
		}
		if x.Param == 0 {
			if _, err := prefixOf(x.Lit); err != nil {
				return err
			}
		}
		p.st.Sel, p.st.SelArgs = SelLike, []Operand{x}
		return nil
	}
	return p.unexpected("expected =, IN or LIKE after series_id")
}

func (p *parser) period() error {
	p.next()
	if p.acceptKw("BETWEEN") {
		lo, err := p.operand("a period")
		if err != nil {
			return err
		}
		if err := p.expectKw("AND"); err != nil {
			return err
		}
		hi, err := p.operand("a period")
		if err != nil {
			return err
		}
		for _, x := range []Operand{lo, hi} {
			if x.Param == 0 {
				if _, _, err := periodBounds(x.Lit); err != nil {
					return err
				}
			}
		}
		p.st.Periods = append(p.st.Periods, PeriodCond{">=", lo}, PeriodCond{"<=", hi})
		return nil
	}
	t := p.peek()
	if t.kind != tokPunct || strings.IndexByte("<>=", t.text[0]) < 0 {
		return p.unexpected("expected >=, <=, >, <, = or BETWEEN after period")
	}
	p.i++
	x, err := p.operand("a period")
	if err != nil {
		return err
	}
	if x.Param == 0 {
		if _, _, err := periodBounds(x.Lit); err != nil {
			return err
		}
	}
	p.st.Periods = append(p.st.Periods, PeriodCond{t.text, x})
	return nil
}

// orderBy accepts only the answer's own order: series_id, then period.
func (p *parser) orderBy() error {
	if err := p.expectKw("BY"); err != nil {
		return err
	}
	for i, want := range []string{"series_id", "period"} {
		if i > 0 && !p.accept(",") {
			break
		}
		if !isColumn(p.peek(), want) {
			return p.unexpected("only ORDER BY series_id, period (the answer's order) is supported; expected " + want)
		}
		p.i++
		p.acceptKw("ASC")
	}
	p.st.Ordered = true
	return nil
}

func limitOf(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, invalid("LIMIT %q: want a whole number of rows from 1 to %d", query.Truncate(s, 64), int64(math.MaxInt64))
	}
	return n, nil
}

// prefixOf is the prefix of a LIKE pattern 'prefix%'. \% and \_ stand for
// themselves; any other % or _ is a wildcard the grammar does not support.
func prefixOf(pat string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(pat); i++ {
		c := pat[i]
		switch {
		case c == '\\' && i+1 < len(pat) && (pat[i+1] == '%' || pat[i+1] == '_' || pat[i+1] == '\\'):
			b.WriteByte(pat[i+1])
			i++
		case c == '%' && i == len(pat)-1:
			return b.String(), nil
		case c == '%' || c == '_':
			return "", invalid("LIKE %q: only a prefix pattern is supported (the prefix, then one percent sign at the end); a backslash before an underscore or percent sign makes it literal", query.Truncate(pat, 64))
		default:
			b.WriteByte(c)
		}
	}
	return "", invalid("LIKE %q: the pattern must end with a percent sign (a prefix pattern); for one series use series_id = 'id'", query.Truncate(pat, 64))
}

// periodBounds are the first and last day of a period string.
func periodBounds(s string) (from, to int32, err error) {
	if from, err = parsePeriod(s); err != nil {
		return 0, 0, err
	}
	to, err = endPeriod(s)
	return from, to, err
}

// String formats the statement in canonical form; parsing it gives the
// same Statement.
func (st *Statement) String() string {
	var b strings.Builder
	b.WriteString("SELECT ")
	switch {
	case st.Star:
		b.WriteString("*")
	case len(st.Aggs) > 0:
		for i, a := range st.Aggs {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(a.Expr() + " AS " + quoteIdent(a.Name))
		}
	default:
		for i, c := range st.Columns {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(c.String())
		}
	}
	b.WriteString(" FROM ")
	table := st.Table.String()
	if st.Schema != (Ident{}) {
		table = st.Schema.String() + "." + table
	}
	if st.Catalog != (Ident{}) {
		table = st.Catalog.String() + "." + table
	}
	if st.Latest {
		fmt.Fprintf(&b, "latest(%s)", table)
	} else {
		b.WriteString(table)
	}
	if st.Vintage != 0 {
		fmt.Fprintf(&b, " FOR VERSION AS OF %d", st.Vintage)
	}
	var conds []string
	switch st.Sel {
	case SelEqual, SelLike:
		conds = append(conds, "series_id "+st.Sel+" "+st.SelArgs[0].String())
	case SelCategory:
		conds = append(conds, "category = "+st.SelArgs[0].String())
	case SelIn:
		xs := make([]string, len(st.SelArgs))
		for i, x := range st.SelArgs {
			xs[i] = x.String()
		}
		conds = append(conds, "series_id IN ("+strings.Join(xs, ", ")+")")
	}
	for _, c := range st.Periods {
		conds = append(conds, "period "+c.Op+" "+c.X.String())
	}
	if len(conds) > 0 {
		b.WriteString(" WHERE " + strings.Join(conds, " AND "))
	}
	if st.Ordered {
		b.WriteString(" ORDER BY series_id, period")
	}
	if st.HasLimit {
		b.WriteString(" LIMIT " + st.Limit.String())
	}
	return b.String()
}

func (x Operand) String() string {
	if x.Param > 0 {
		return "?"
	}
	return "'" + strings.ReplaceAll(x.Lit, "'", "''") + "'"
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
