package sqlq

import (
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/query"
)

// Query is a statement with its parameters bound: the table it reads and
// the read layer's request.
type Query struct {
	// Catalog, Schema and Table are the statement's, for the caller to
	// check and resolve to a dataset.
	Catalog, Schema, Table Ident
	// Columns are the statement's columns (nil for * and aggregates);
	// Request.Columns holds their names as written until the caller
	// resolves them against the dataset's.
	Columns []Ident
	// Aggs, when any, ask for one row of totals rather than the rows.
	Aggs []Agg
	// Vintage is the retained vintage to read (FOR VERSION AS OF); 0: the
	// served snapshot.
	Vintage uint64
	Request query.Request
}

func parsePeriod(s string) (int32, error) {
	d, err := period.Parse(s)
	if err != nil {
		return 0, query.Errorf(query.ErrInvalid, "sql: %v (periods: YYYY, YYYY-MM, YYYYMM, YYYYQn, YYYY-Www, YYYY-MM-DD, YYYYMMDD)", err)
	}
	return d, nil
}

func endPeriod(s string) (int32, error) {
	d, err := period.End(s)
	if err != nil {
		return 0, query.Errorf(query.ErrInvalid, "sql: %v", err)
	}
	return d, nil
}

// Bind substitutes params for the statement's ? in order (each as its
// text: a string, a period, a number) and builds the request.
func (st *Statement) Bind(params []string) (*Query, error) {
	if len(params) != st.Params {
		return nil, query.Errorf(query.ErrInvalid, "sql: the statement has %d parameters, %d bound", st.Params, len(params))
	}
	val := func(x Operand) string {
		if x.Param > 0 {
			return params[x.Param-1]
		}
		return x.Lit
	}
	q := &Query{Catalog: st.Catalog, Schema: st.Schema, Table: st.Table, Vintage: st.Vintage,
		Columns: append([]Ident(nil), st.Columns...), Aggs: append([]Agg(nil), st.Aggs...)}
	r := &q.Request
	r.Latest = st.Latest
	r.Range = query.AllPeriods
	if st.Star {
		r.Attributes = true
	} else {
		r.Columns = make([]string, len(st.Columns))
		for i, c := range st.Columns {
			r.Columns[i] = c.Name
		}
	}
	switch st.Sel {
	case SelAll:
		r.Select = query.Selector{Kind: query.ByPrefix}
	case SelEqual, SelIn:
		ids := make([]string, len(st.SelArgs))
		for i, x := range st.SelArgs {
			ids[i] = val(x)
		}
		r.Select = query.Selector{Kind: query.ByIDs, IDs: ids}
	case SelLike:
		pre, err := prefixOf(val(st.SelArgs[0]))
		if err != nil {
			return nil, err
		}
		r.Select = query.Selector{Kind: query.ByPrefix, Prefix: pre}
	case SelCategory:
		r.Select = query.Selector{Kind: query.ByCategory, Category: val(st.SelArgs[0])}
	}
	for _, c := range st.Periods {
		from, to, err := periodBounds(val(c.X))
		if err != nil {
			return nil, err
		}
		lo, hi := query.AllPeriods.From, query.AllPeriods.To
		switch c.Op {
		case ">=":
			lo = from
		case ">":
			lo = to + 1
		case "<=":
			hi = to
		case "<":
			hi = from - 1
		case "=":
			lo, hi = from, to
		default:
			return nil, invalid("period %s: unsupported comparison", c.Op)
		}
		r.Range.From, r.Range.To = max(r.Range.From, lo), min(r.Range.To, hi)
	}
	if r.Range.From > r.Range.To {
		return nil, query.Errorf(query.ErrInvalid, "sql: the period conditions select no period (from %s to %s)", period.Format(r.Range.From), period.Format(r.Range.To))
	}
	if st.HasLimit {
		n, err := limitOf(val(st.Limit))
		if err != nil {
			return nil, err
		}
		r.Limit = n
	}
	return q, nil
}
