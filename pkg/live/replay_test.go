package live

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/wal"
)

func testSchema(t testing.TB) *livedelta.Schema {
	t.Helper()
	s, err := livedelta.NewSchema(datafile.Schema(arrow.PrimitiveTypes.Float64, nil),
		[]arrow.Field{{Name: "unit", Type: arrow.BinaryTypes.String, Nullable: true}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testWrite is a normalized write of n rows of series "s0".."s9" (unit
// given), periods 0..19, values from v.
func testWrite(s *livedelta.Schema, rng *rand.Rand, n int, v float64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, s.Write)
	defer b.Release()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("s%d", rng.IntN(10))
		b.Field(0).(*array.StringBuilder).Append(id)
		b.Field(1).(*array.Date32Builder).Append(arrow.Date32(rng.IntN(20)))
		b.Field(2).(*array.Float64Builder).Append(v + float64(i))
		b.Field(3).(*array.StringBuilder).Append("u-" + id)
		b.Field(4).(*array.BooleanBuilder).Append(true)
	}
	return b.NewRecordBatch()
}

type nullTarget struct{ published *livedelta.State }

func (t *nullTarget) Base() livedelta.Base        { return nil }
func (t *nullTarget) Publish(st *livedelta.State) { t.published = st }

// logRecords appends payloads to a new log in dir, one write each.
func logRecords(t *testing.T, dir string, payloads ...[]byte) []wal.Position {
	t.Helper()
	l, err := wal.Open(dir, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out []wal.Position
	for _, p := range payloads {
		pos, err := l.Append(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pos)
	}
	return out
}

// TestReplayAppliesAfterFolded: Open replays exactly the records after the
// folded position, and the State it publishes holds, per key, what
// applying those records in order gives.
func TestReplayAppliesAfterFolded(t *testing.T) {
	s := testSchema(t)
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []arrow.RecordBatch
	var payloads [][]byte
	for i := 0; i < 12; i++ {
		r := testWrite(s, rng, 1+rng.IntN(40), float64(1000*i))
		defer r.Release()
		p, err := encode(r)
		if err != nil {
			t.Fatal(err)
		}
		recs, payloads = append(recs, r), append(payloads, p)
	}
	dir := filepath.Join(t.TempDir(), "wal")
	pos := logRecords(t, dir, payloads...)
	for _, folded := range []int{-1, 0, 5, 11} {
		t.Run(fmt.Sprint(folded), func(t *testing.T) {
			var after uint64
			if folded >= 0 {
				after = pos[folded].Uint64()
			}
			want := livedelta.Empty(s)
			var rows int64
			for i := folded + 1; i < len(recs); i++ {
				var err error
				if want, err = want.Apply(context.Background(), memory.DefaultAllocator, recs[i], uint64(i+1), pos[i].Uint64(), nil); err != nil {
					t.Fatal(err)
				}
				rows += recs[i].NumRows()
			}
			tg := &nullTarget{}
			w, info, err := Open(dir, s, after, tg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if info.Records != len(recs)-folded-1 || info.Rows != rows {
				t.Fatalf("replayed %d records, %d rows; want %d, %d", info.Records, info.Rows, len(recs)-folded-1, rows)
			}
			if tg.published != w.State() {
				t.Fatal("the replayed State was not published")
			}
			if got, wantRows := mergedRows(w.State()), mergedRows(want); got != wantRows {
				t.Fatalf("replayed rows\n%s\nwant\n%s", got, wantRows)
			}
			if w.State().Added() != want.Added() {
				t.Fatalf("added %d, want %d", w.State().Added(), want.Added())
			}
		})
	}
}

// mergedRows renders the newest row per key of a State's runs.
func mergedRows(st *livedelta.State) string {
	rows := map[string]string{}
	for _, r := range st.Runs() {
		vals := r.Record().Column(datafile.ColumnValue).(*array.Float64).Float64Values()
		ps := r.Periods()
		for i := 0; i < r.NumSeries(); i++ {
			lo, hi := r.Rows(i)
			for j := lo; j < hi; j++ {
				rows[fmt.Sprintf("%s@%03d", r.SeriesID(i), ps[j])] = fmt.Sprint(vals[j])
			}
		}
	}
	var out []string
	for k, v := range rows {
		out = append(out, k+" "+v)
	}
	return strings.Join(sorted(out), "\n")
}

func sorted(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j-1] > s[j]; j-- {
			s[j-1], s[j] = s[j], s[j-1]
		}
	}
	return s
}

// TestReplayRefusesUndecodable: a record whose checksum holds but whose
// payload is not a write of the dataset's schema stops Open, naming the
// record's position; nothing is served.
func TestReplayRefusesUndecodable(t *testing.T) {
	s := testSchema(t)
	rng := rand.New(rand.NewPCG(3, 4))
	good := testWrite(s, rng, 5, 0)
	defer good.Release()
	gp, err := encode(good)
	if err != nil {
		t.Fatal(err)
	}
	other := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil),
		[]arrow.Array{array.MakeArrayOfNull(memory.DefaultAllocator, arrow.PrimitiveTypes.Int64, 1)}, 1)
	defer other.Release()
	op, err := encode(other)
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"garbage":  []byte("not an arrow stream at all"),
		"cut":      gp[:len(gp)/2],
		"empty":    {},
		"schema":   op,
		"noRecord": gp[:schemaEnd(t, gp)],
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "wal")
			pos := logRecords(t, dir, gp, bad, gp)
			tg := &nullTarget{}
			_, _, err := Open(dir, s, 0, tg, Options{})
			if err == nil {
				t.Fatal("opened over an undecodable record")
			}
			if want := "record at " + pos[1].String(); !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not name %q", err, want)
			}
			if tg.published != nil {
				t.Fatal("a State was published from a failed replay")
			}
		})
	}
}

// schemaEnd is the length of the schema message at the start of an IPC
// stream: a stream cut there has a schema and no record batch.
func schemaEnd(t *testing.T, p []byte) int {
	t.Helper()
	m := &sliceMessages{b: p}
	m.refs.Store(1)
	defer m.Release()
	if _, err := m.Message(); err != nil {
		t.Fatal(err)
	}
	return len(p) - len(m.b)
}

// FuzzDecodeRecord: any payload decodes to a record of the write schema
// with sound buffers, or to an error; never a panic.
func FuzzDecodeRecord(f *testing.F) {
	s := testSchema(f)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 7} {
		r := testWrite(s, rng, n, 0)
		p, err := encode(r)
		r.Release()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p)
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 8, 0, 0, 0})
	f.Fuzz(func(t *testing.T, p []byte) {
		rec, err := decodeRecord(p, s)
		if err != nil {
			return
		}
		defer rec.Release()
		if !rec.Schema().Equal(s.Write) {
			t.Fatalf("decoded a record of schema %v", rec.Schema())
		}
		// The bulk load reads every value: it must not fault.
		if _, err := livedelta.Bulk(context.Background(), memory.DefaultAllocator, s, []arrow.RecordBatch{rec}, 1, 1, nil); err != nil {
			t.Fatal(err)
		}
	})
}

// hostileRow is one row of a write built by hand, as a faulty or hostile
// writer could log it with a valid checksum.
type hostileRow struct {
	id     *string
	day    *int32
	unit   string
	given  bool
	nullGv bool
}

func strp(s string) *string { return &s }
func dayp(d int32) *int32   { return &d }

// hostileWrite builds a record of the write schema from rows, with no
// check of what they hold.
func hostileWrite(s *livedelta.Schema, rows []hostileRow) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, s.Write)
	defer b.Release()
	for i, r := range rows {
		if r.id == nil {
			b.Field(0).AppendNull()
		} else {
			b.Field(0).(*array.StringBuilder).Append(*r.id)
		}
		if r.day == nil {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.Date32Builder).Append(arrow.Date32(*r.day))
		}
		b.Field(2).(*array.Float64Builder).Append(float64(i))
		b.Field(3).(*array.StringBuilder).Append(r.unit)
		if r.nullGv {
			b.Field(4).AppendNull()
		} else {
			b.Field(4).(*array.BooleanBuilder).Append(r.given)
		}
	}
	return b.NewRecordBatch()
}

// TestReplayRefusesHostile: a record of the write schema whose checksum
// holds but whose values no DoPut accepts stops the replay (and a
// replica's follow) naming the record's position, the row and the
// column; nothing is served.
func TestReplayRefusesHostile(t *testing.T) {
	s := testSchema(t)
	ok := hostileRow{id: strp("s1"), day: dayp(100), unit: "u-s1", given: true}
	with := func(f func(r *hostileRow)) []hostileRow {
		r := ok
		f(&r)
		return []hostileRow{ok, r}
	}
	for _, tc := range []struct {
		name string
		rows []hostileRow
		msg  string
	}{
		{"empty id", with(func(r *hostileRow) { r.id = strp("") }), `row 1, column "series_id": empty series id`},
		{"null id", with(func(r *hostileRow) { r.id = nil }), `row 1, column "series_id": null series id`},
		{"invalid UTF-8 id", with(func(r *hostileRow) { r.id = strp("s\xff1") }), `column "series_id": row 1: the string is not valid UTF-8`},
		{"id starting inside a character", []hostileRow{{id: strp("\xc3"), day: dayp(1), given: true, unit: "u"}, {id: strp("\xa9x"), day: dayp(1), given: true, unit: "u"}}, `column "series_id": row 0: the string is not valid UTF-8`},
		{"period 2^31-1 days", with(func(r *hostileRow) { r.day = dayp(math.MaxInt32) }), `row 1, column "period": 5881580-07-11: period outside 0001-01-01..9999-12-31`},
		{"period -2^31 days", with(func(r *hostileRow) { r.day = dayp(math.MinInt32) }), `row 1, column "period": -5877641-06-23: period outside`},
		{"period before year 1", with(func(r *hostileRow) { r.day = dayp(period.MinDays - 1) }), `row 1, column "period": 0000-12-31: period outside`},
		{"null period", with(func(r *hostileRow) { r.day = nil }), `row 1, column "period": null period`},
		{"given mixed", with(func(r *hostileRow) { r.given = false }), `row 1, column "servingsnap.attributes_given": false here and true in row 0`},
		{"given null", with(func(r *hostileRow) { r.nullGv = true }), `row 1, column "servingsnap.attributes_given": null`},
		{"attribute varies within a series", with(func(r *hostileRow) { r.unit = "other" }), `row 1, column "unit": series "s1" has "other" here and "u-s1" in row 0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good := hostileWrite(s, []hostileRow{ok})
			defer good.Release()
			gp, err := encode(good)
			if err != nil {
				t.Fatal(err)
			}
			bad := hostileWrite(s, tc.rows)
			defer bad.Release()
			bp, err := encode(bad)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "wal")
			pos := logRecords(t, dir, gp, bp, gp)
			tg := &nullTarget{}
			_, _, err = Open(dir, s, 0, tg, Options{})
			if err == nil {
				t.Fatal("opened over a hostile record")
			}
			for _, want := range []string{"record at " + pos[1].String(), tc.msg} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
			if !errors.Is(err, livedelta.ErrInvalid) {
				t.Errorf("error %v is not livedelta.ErrInvalid", err)
			}
			if tg.published != nil {
				t.Fatal("a State was published from a failed replay")
			}
		})
	}
}

// FuzzReplayResealed: any payload, logged with a valid checksum between
// two sound writes, either stops the replay naming its own position or
// is a write DoPut could have made (ids present, non-empty and UTF-8,
// periods in years 0001-9999), decoded and served; never a panic.
func FuzzReplayResealed(f *testing.F) {
	s := testSchema(f)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 5} {
		r := testWrite(s, rng, n, 0)
		p, err := encode(r)
		r.Release()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p)
	}
	for _, rows := range [][]hostileRow{
		{{id: strp(""), day: dayp(1), given: true, unit: "u"}},
		{{id: strp("a"), day: dayp(math.MaxInt32), given: true, unit: "u"}},
		{{id: strp("a\xff"), day: dayp(1), given: true, unit: "u"}},
	} {
		r := hostileWrite(s, rows)
		p, err := encode(r)
		r.Release()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p)
	}
	good := testWrite(s, rng, 3, 0)
	gp, err := encode(good)
	good.Release()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		dir := filepath.Join(t.TempDir(), "wal")
		pos := logRecords(t, dir, gp, p, gp)
		tg := &nullTarget{}
		w, _, err := Open(dir, s, 0, tg, Options{})
		if err != nil {
			if want := "record at " + pos[1].String(); !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not name %q", err, want)
			}
			return
		}
		w.Close()
		rec, err := decodeRecord(p, s)
		if err != nil {
			t.Fatalf("replay accepted a record that does not decode: %v", err)
		}
		defer rec.Release()
		ids := rec.Column(0).(*array.String)
		days := rec.Column(1).(*array.Date32)
		for i := 0; i < int(rec.NumRows()); i++ {
			if ids.IsNull(i) || ids.Value(i) == "" || !utf8.ValidString(ids.Value(i)) {
				t.Fatalf("replay accepted series id %q at row %d", ids.Value(i), i)
			}
			if days.IsNull(i) || !period.InRange(int32(days.Value(i))) {
				t.Fatalf("replay accepted period %v at row %d", days.Value(i), i)
			}
		}
	})
}
