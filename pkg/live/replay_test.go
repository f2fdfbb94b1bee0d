package live

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/delta"
	"github.com/energyscope/servingsnap/pkg/wal"
)

func testSchema(t testing.TB) *delta.Schema {
	t.Helper()
	s, err := delta.NewSchema(datafile.Schema(arrow.PrimitiveTypes.Float64, nil),
		[]arrow.Field{{Name: "unit", Type: arrow.BinaryTypes.String, Nullable: true}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testWrite is a normalized write of n rows of series "s0".."s9" (unit
// given), periods 0..19, values from v.
func testWrite(s *delta.Schema, rng *rand.Rand, n int, v float64) arrow.RecordBatch {
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

type nullTarget struct{ published *delta.State }

func (t *nullTarget) Base() delta.Base        { return nil }
func (t *nullTarget) Publish(st *delta.State) { t.published = st }

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
			want := delta.Empty(s)
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
func mergedRows(st *delta.State) string {
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
		rec, err := decodeRecord(p, s.Write)
		if err != nil {
			return
		}
		defer rec.Release()
		if !rec.Schema().Equal(s.Write) {
			t.Fatalf("decoded a record of schema %v", rec.Schema())
		}
		// The bulk load reads every value: it must not fault.
		if _, err := delta.Bulk(context.Background(), memory.DefaultAllocator, s, []arrow.RecordBatch{rec}, 1, 1, nil); err != nil {
			t.Fatal(err)
		}
	})
}
