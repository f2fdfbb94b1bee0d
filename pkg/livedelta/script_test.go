package livedelta

// Golden scripts of the live-write delta (testdata/*.txt, run by
// internal/datadriven; go test -run TestScripts -rewrite records new
// output). Rows are "ID DATE VALUE [STATUS]" lines. Commands:
//
//	base                 the snapshot under the delta: "ID DATE=VALUE ..." a series
//	apply [given=IDS]    State.Apply of the input rows (merges as writes arrive)
//	append [given=IDS]   State.Append of the input rows (a run of its own, no merge)
//	merge                State.MergeCandidate, Merge and Replace
//	freeze | thaw        State.Freeze, State.Thaw
//	drop-frozen          State.DropFrozen over the same base (the compaction's snapshot is served)
//	runs                 the State's runs, oldest first, and their rows
//	read [id=ID]         what a read sees: per (id, date) the newest run's row, else the base's
//
// given=IDS: the write carries the attributes of those series. Each write's
// sequence number and log position is its number in the script.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/datadriven"
	"github.com/energyscope/servingsnap/pkg/datafile"
)

func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/*.txt", func(t *testing.T, path string) {
		s := &deltaScript{t: t, base: &scriptBase{}}
		s.st = Empty(testSchema(t))
		datadriven.RunFile(t, path, s.run)
	})
}

// scriptBase is a base snapshot with values, so that a read can show what
// the delta shadows.
type scriptBase struct {
	ids     []string // ascending
	periods [][]arrow.Date32
	values  [][]float64
}

func (b *scriptBase) Lookup(id string) (int, bool) { return slices.BinarySearch(b.ids, id) }

func (b *scriptBase) Periods(code int) []arrow.Date32 { return b.periods[code] }

type deltaScript struct {
	t      *testing.T
	base   *scriptBase
	st     *State
	writes int
}

func (s *deltaScript) run(d *datadriven.Directive) string {
	ctx, mem := context.Background(), memory.DefaultAllocator
	switch d.Cmd {
	case "base":
		s.base = s.parseBase(d)
		s.st = s.st.Rebase(s.base)
		return fmt.Sprintf("%d series", len(s.base.ids))
	case "apply", "append":
		rec := write(s.st.Schema(), s.parseRows(d), s.given(d))
		defer rec.Release()
		s.writes++
		n := uint64(s.writes)
		op := s.st.Apply
		if d.Cmd == "append" {
			op = s.st.Append
		}
		st, err := op(ctx, mem, rec, n, n, s.base)
		if err != nil {
			return "error: " + err.Error()
		}
		s.st = st
		return s.summary()
	case "merge":
		rs, ok := s.st.MergeCandidate()
		if !ok {
			return "nothing to merge\n" + s.summary()
		}
		m, err := s.st.Merge(ctx, mem, rs)
		if err != nil {
			return "error: " + err.Error()
		}
		st, ok := s.st.Replace(rs, m)
		if !ok {
			d.Fatalf(s.t, "Replace refused the runs MergeCandidate gave")
		}
		s.st = st
		return fmt.Sprintf("merged %s\n", count(len(rs), "run")) + s.summary()
	case "freeze":
		s.st = s.st.Freeze()
		return fmt.Sprintf("frozen through position %d\n", s.st.FrozenPosition()) + s.summary()
	case "thaw":
		s.st = s.st.Thaw()
		return s.summary()
	case "drop-frozen":
		s.st = s.st.DropFrozen(s.base)
		return s.summary()
	case "runs":
		return s.runs()
	case "read":
		return s.read(d)
	}
	d.Fatalf(s.t, "unknown command")
	return ""
}

// date parses a script's YYYY-MM-DD.
func (s *deltaScript) date(d *datadriven.Directive, v string) arrow.Date32 {
	tm, err := time.Parse(time.DateOnly, v)
	if err != nil {
		d.Fatalf(s.t, "date %q: %v", v, err)
	}
	return arrow.Date32FromTime(tm)
}

func (s *deltaScript) number(d *datadriven.Directive, v string) float64 {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		d.Fatalf(s.t, "value %q: %v", v, err)
	}
	return f
}

func (s *deltaScript) parseBase(d *datadriven.Directive) *scriptBase {
	b := &scriptBase{}
	for _, l := range strings.Split(d.Input, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			d.Fatalf(s.t, "base line %q: want ID DATE=VALUE ...", l)
		}
		if len(b.ids) > 0 && b.ids[len(b.ids)-1] >= f[0] {
			d.Fatalf(s.t, "base series %q: ids must ascend", f[0])
		}
		var ps []arrow.Date32
		var vs []float64
		for _, pv := range f[1:] {
			p, v, ok := strings.Cut(pv, "=")
			if !ok {
				d.Fatalf(s.t, "base line %q: %q is not DATE=VALUE", l, pv)
			}
			ps = append(ps, s.date(d, p))
			vs = append(vs, s.number(d, v))
		}
		b.ids = append(b.ids, f[0])
		b.periods = append(b.periods, ps)
		b.values = append(b.values, vs)
	}
	return b
}

func (s *deltaScript) parseRows(d *datadriven.Directive) []row {
	var rows []row
	for _, l := range strings.Split(d.Input, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || len(f) > 4 {
			d.Fatalf(s.t, "row %q: want ID DATE VALUE [STATUS]", l)
		}
		r := row{id: f[0], period: int32(s.date(d, f[1])), value: s.number(d, f[2]), null: len(f) == 3}
		if !r.null {
			r.status = f[3]
		}
		rows = append(rows, r)
	}
	return rows
}

func (s *deltaScript) given(d *datadriven.Directive) map[string]bool {
	ids, _ := d.Arg("given")
	m := map[string]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// summary is the State's counts: rows held, rows it adds to the base, runs.
func (s *deltaScript) summary() string {
	var frozen int
	for _, r := range s.st.Runs() {
		if slices.Contains(s.st.Frozen(), r) {
			frozen++
		}
	}
	out := fmt.Sprintf("%s, %s, %d added", count(len(s.st.Runs()), "run"), count(int(s.st.Rows()), "row"), s.st.Added())
	if frozen > 0 {
		out += fmt.Sprintf(", %d frozen", frozen)
	}
	return out
}

// count is n and the noun, plural unless n is 1.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// deltaRow is a row as a run holds it.
type deltaRow struct {
	id     string
	period arrow.Date32
	text   string // value and status, as printed
	seq    uint64
}

// rowsOf lists run r's rows.
func rowsOf(r *Run) []deltaRow {
	rec := r.Record()
	vals := rec.Column(datafile.ColumnValue).(*array.Float64).Float64Values()
	status := rec.Column(3).(*array.String)
	ps := r.Periods()
	var out []deltaRow
	for i := 0; i < r.NumSeries(); i++ {
		lo, hi := r.Rows(i)
		for j := lo; j < hi; j++ {
			text := strconv.FormatFloat(vals[j], 'g', -1, 64)
			if !status.IsNull(j) {
				text += " " + status.Value(j)
			}
			out = append(out, deltaRow{id: r.SeriesID(i), period: ps[j], text: text, seq: r.Seq()})
		}
	}
	return out
}

func (s *deltaScript) runs() string {
	var out []string
	for _, r := range s.st.Runs() {
		h := fmt.Sprintf("run seq=%d: %s of %d series", r.Seq(), count(r.Len(), "row"), r.NumSeries())
		if slices.Contains(s.st.Frozen(), r) {
			h += ", frozen"
		}
		var fresh []string
		for _, i := range r.Fresh() {
			fresh = append(fresh, r.SeriesID(int(i)))
		}
		if len(fresh) > 0 {
			h += ", new series " + strings.Join(fresh, ",")
		}
		out = append(out, h)
		for _, dr := range rowsOf(r) {
			out = append(out, fmt.Sprintf("  %s %s %s", dr.id, dr.period.FormattedString(), dr.text))
		}
	}
	if len(out) == 0 {
		return "no runs"
	}
	return strings.Join(out, "\n")
}

// read merges the runs over the base as the contract says a read does
// (query.Composite): for each (id, date) the newest run holding it wins,
// else the base's row. Each row says where it came from.
func (s *deltaScript) read(d *datadriven.Directive) string {
	only, _ := d.ArgOne("id")
	type key struct {
		id string
		p  arrow.Date32
	}
	seen := map[key]string{}
	for c, id := range s.base.ids {
		for j, p := range s.base.periods[c] {
			seen[key{id, p}] = strconv.FormatFloat(s.base.values[c][j], 'g', -1, 64) + " (base)"
		}
	}
	for _, r := range s.st.Runs() { // oldest first: a newer run overwrites
		for _, dr := range rowsOf(r) {
			seen[key{dr.id, dr.period}] = fmt.Sprintf("%s (run %d)", dr.text, dr.seq)
		}
	}
	keys := make([]key, 0, len(seen))
	for k := range seen {
		if only == "" || k.id == only {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := strings.Compare(a.id, b.id); c != 0 {
			return c
		}
		return int(a.p - b.p)
	})
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s %s %s", k.id, k.p.FormattedString(), seen[k]))
	}
	if len(out) == 0 {
		return "no rows"
	}
	return strings.Join(out, "\n")
}
