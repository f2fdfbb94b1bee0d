package sortwrite

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// TestAttrsCheckedWhileRead builds a lake whose string columns are
// attributes or not in each way the read's per-series check meets: the
// same value everywhere (unit), constant within every row group but not
// across them (region: row groups of one file; source: the two files),
// varying inside a row group (note), absent from one file (late), only
// nulls in some series (opt). The files must be byte-identical to a build
// without the page reader (every column checked row by row, by the
// layout), and the read must have decided the columns it can.
func TestAttrsCheckedWhileRead(t *testing.T) {
	in := t.TempDir()
	for f := range 2 {
		fields := []arrow.Field{
			{Name: "series_id", Type: arrow.BinaryTypes.String},
			{Name: "period", Type: arrow.BinaryTypes.String},
			{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
			{Name: "unit", Type: arrow.BinaryTypes.String, Nullable: true},
			{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true},
			{Name: "source", Type: arrow.BinaryTypes.String, Nullable: true},
			{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
			{Name: "opt", Type: arrow.BinaryTypes.String, Nullable: true},
		}
		if f == 1 {
			fields = append(fields, arrow.Field{Name: "late", Type: arrow.BinaryTypes.String, Nullable: true})
		}
		sc := arrow.NewSchema(fields, nil)
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		str := func(i int) *array.StringBuilder { return b.Field(i).(*array.StringBuilder) }
		for s := range 40 {
			for m := range 12 {
				row := s*12 + m
				str(0).Append(fmt.Sprintf("S%02d", (s*7)%40))
				str(1).Append(fmt.Sprintf("%d-%02d", 2000+f, m+1))
				b.Field(2).(*array.Float64Builder).Append(float64(row))
				str(3).Append([]string{"MW", "t"}[s%2])
				// A series' rows in two row groups (of 100 rows) get
				// two regions when it straddles them.
				str(4).Append(fmt.Sprintf("R%d", row/100))
				str(5).Append(fmt.Sprintf("src %d", (s+f)%3))
				str(6).Append(fmt.Sprintf("n%d", m%2))
				appendOr(b.Field(7), s%3 == 0, func() { str(7).Append("o") })
				if f == 1 {
					str(8).Append("L")
				}
			}
		}
		rec := b.NewRecordBatch()
		b.Release()
		testlake.WriteRecord(t, filepath.Join(in, fmt.Sprintf("part-%d.parquet", f)), 100, rec)
		rec.Release()
	}
	var mu sync.Mutex
	decided := map[string]bool{}
	onAttrsRead = func(c string, attr bool) { mu.Lock(); decided[c] = attr; mu.Unlock() }
	defer func() { onAttrsRead = nil }()
	fast := builtFiles(t, in)
	want := map[string]bool{"unit": true, "region": false, "source": false, "note": false, "opt": true, "late": false}
	for c, attr := range want {
		if got, ok := decided[c]; !ok || got != attr {
			t.Errorf("column %q: read found it an attribute: %v (checked: %v), want %v", c, got, ok, attr)
		}
	}
	pageReaderOff = true
	defer func() { pageReaderOff = false }()
	clear(decided)
	slow := builtFiles(t, in)
	if slices.Contains(slices.Collect(mapsValues(decided)), true) {
		t.Errorf("without the page reader the read decided attributes: %v", decided)
	}
	for _, role := range []string{manifest.RoleData, manifest.RoleIndex} {
		if !bytes.Equal(fast[role], slow[role]) {
			t.Errorf("%s file differs with attributes checked while read (%d bytes) and by the layout (%d bytes)", role, len(fast[role]), len(slow[role]))
		}
	}
}

func mapsValues(m map[string]bool) func(func(bool) bool) {
	return func(yield func(bool) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}
