package inspect_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/inspect"
	"github.com/energyscope/servingsnap/pkg/inspect/inspecttest"
	"github.com/energyscope/servingsnap/pkg/live"
	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

type baseTarget struct{ r *query.SnapshotReader }

func (b baseTarget) Base() livedelta.Base     { return b.r }
func (b baseTarget) Publish(*livedelta.State) {}

// TestSummaryShowsLiveWrites: with a writer holding the WAL, the summary
// still reads it and counts the writes pending over the snapshot.
func TestSummaryShowsLiveWrites(t *testing.T) {
	dir := inspecttest.Build(t, t.TempDir(), false)
	s, err := snapshot.Open(dir, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := query.FromSnapshot(inspecttest.Name, s)
	if err != nil {
		t.Fatal(err)
	}
	fields, _ := s.Index().Attributes()
	sc, err := livedelta.NewSchema(s.Schema(), fields)
	if err != nil {
		t.Fatal(err)
	}
	w, _, err := live.Open(filepath.Join(dir, "wal"), sc, 0, baseTarget{r}, live.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: arrow.BinaryTypes.String},
		{Name: "period", Type: arrow.BinaryTypes.String},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64},
	}, nil))
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"NG.HH.D", "NG.HH.D"}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"2024-01-08", "2024-01-09"}, nil)
	b.Field(2).(*array.Float64Builder).AppendValues([]float64{3.1, 3.2}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	norm, err := livedelta.Normalize(context.Background(), memory.DefaultAllocator, sc, rec, 0, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Put(context.Background(), norm); err != nil {
		t.Fatal(err)
	}
	sum, err := inspect.Summarize(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	lw := sum.LiveWrites
	if lw == nil || lw.Pending != 1 || lw.Rows != 2 || lw.Records != 1 || len(lw.Segments) != 1 || lw.Segments[0].Problem != "" {
		t.Fatalf("live writes: %+v", lw)
	}
}
