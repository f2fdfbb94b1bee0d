package served

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// TestSwapUnderLoad: readers never fail or see a closed snapshot while the
// dataset's snapshot is swapped under them, and every replaced snapshot is
// unmapped once its readers are done.
func TestSwapUnderLoad(t *testing.T) {
	dir := t.TempDir()
	lake, ds := testsnap.Sample(t, dir, "SWP", 50, 9, nil)
	testsnap.Build(t, lake, ds, nil) // snapshot 2, same rows
	d, err := Open(filepath.Join(dir, "SWP"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	first := d.cur.Load().snap

	var wg sync.WaitGroup
	stop := make(chan struct{})
	errc := make(chan error, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				v := d.acquire()
				code, _ := v.snap.Lookup(v.snap.Index().SeriesID(7))
				p, err := query.NewPlan(v.r, &query.Request{Select: query.Selector{Kind: query.ByPrefix}, Range: query.Range{From: math.MinInt32, To: math.MaxInt32}}, query.Limits{})
				if err == nil {
					var rec arrow.RecordBatch
					rec, err = v.snap.Rows(code, math.MinInt32, math.MaxInt32)
					if err == nil {
						_ = rec.Column(1).(*array.Date32).Value(0) // touches the mapping
						rec.Release()
					}
					if err == nil && p.Rows() != v.Manifest().Stats.Rows {
						err = errors.New("row count changed")
					}
				}
				v.Release()
				if err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	var olds []*snapshot.Snapshot
	for i := 0; i < 40; i++ {
		id := uint64(1 + i%2)
		s, err := snapshot.OpenID(filepath.Join(dir, "SWP"), id, snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		olds = append(olds, d.cur.Load().snap)
		if _, err := d.swap(s); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	for i, s := range append(olds, first) {
		if s.Refs() != 0 {
			t.Errorf("replaced snapshot %d still has %d references", i, s.Refs())
		}
	}
	if n := d.cur.Load().snap.Refs(); n != 1 {
		t.Errorf("live snapshot has %d references, want the dataset's 1", n)
	}
}

// putBatch is a write of rows (id, period as days since 1970, value) to
// the sample datasets' schema.
func putBatch(t testing.TB, rows ...struct {
	id string
	p  int32
	v  float64
}) arrow.RecordBatch {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: arrow.BinaryTypes.String},
		{Name: "period", Type: arrow.FixedWidthTypes.Date32},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.StringBuilder).Append(r.id)
		b.Field(1).(*array.Date32Builder).Append(arrow.Date32(r.p))
		b.Field(2).(*array.Float64Builder).Append(r.v)
	}
	return b.NewRecordBatch()
}

// TestEmptyPutAge: a batch of no rows does not start the age of the
// oldest unfolded write (--compact-age), a batch of rows does.
func TestEmptyPutAge(t *testing.T) {
	_, dir := testsnap.Sample(t, t.TempDir(), "AGE", 5, 1, nil)
	d, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	w, err := d.Writer()
	if err != nil {
		t.Fatal(err)
	}
	since := func() time.Time { d.stMu.Lock(); defer d.stMu.Unlock(); return d.cs.since }
	empty := putBatch(t)
	defer empty.Release()
	if ack, err := d.Put(context.Background(), w, memory.DefaultAllocator, empty, 0); err != nil || ack.Rows != 0 {
		t.Fatalf("empty put: %+v %v", ack, err)
	}
	if !since().IsZero() {
		t.Fatalf("an empty put started the delta's age at %v", since())
	}
	v := d.acquire()
	id := v.snap.Index().SeriesID(0)
	v.Release()
	one := putBatch(t, struct {
		id string
		p  int32
		v  float64
	}{id, 21915, 4}) // 2030-01-01: an append
	defer one.Release()
	if _, err := d.Put(context.Background(), w, memory.DefaultAllocator, one, 1); err != nil {
		t.Fatal(err)
	}
	if since().IsZero() {
		t.Fatal("a put of rows did not start the delta's age")
	}
	if p := d.Due(CompactPolicy{Age: time.Nanosecond}); p == "" {
		t.Error("a write older than the age threshold is not due for compaction")
	}
}
