package testlake

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// WriteUniform writes series × rows rows: ids "S.0000042", monthly
// periods from 2000-01, a value and a category attribute.
func WriteUniform(b testing.TB, dir string, series, rows int) {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: arrow.BinaryTypes.String},
		{Name: "period", Type: arrow.FixedWidthTypes.Date32},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "category", Type: arrow.BinaryTypes.String},
	}, nil)
	f, err := os.Create(filepath.Join(dir, "part-0.parquet"))
	if err != nil {
		b.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(sc, f, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(1<<20), parquet.WithDictionaryDefault(false)), pqarrow.DefaultWriterProps())
	if err != nil {
		b.Fatal(err)
	}
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer bld.Release()
	start := int32(10957) // 2000-01-01
	n := 0
	flush := func() {
		rec := bld.NewRecordBatch()
		if err := w.Write(rec); err != nil {
			b.Fatal(err)
		}
		rec.Release()
		n = 0
	}
	for s := 0; s < series; s++ {
		id := fmt.Sprintf("S.%07d", s)
		cat := "C" + strconv.Itoa(s%20)
		for r := 0; r < rows; r++ {
			bld.Field(0).(*array.StringBuilder).Append(id)
			bld.Field(1).(*array.Date32Builder).Append(arrow.Date32(start + int32(r*31)))
			bld.Field(2).(*array.Float64Builder).Append(float64(s) + float64(r)/1000)
			bld.Field(3).(*array.StringBuilder).Append(cat)
			if n++; n == 1<<20 {
				flush()
			}
		}
	}
	flush()
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

// UniformIDs are the ids of WriteUniform, shuffled (the same order every
// time).
func UniformIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("S.%07d", i)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	return ids
}

// UniformBatch is n rows of writes to WriteUniform's series (rows of 150
// periods): for row i, series ids[(k+i) % len], a period after the base's
// (appends) or inside it (revisions).
func UniformBatch(ids []string, k, n int, revise bool) arrow.RecordBatch {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: arrow.BinaryTypes.String},
		{Name: "period", Type: arrow.FixedWidthTypes.Date32},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer bld.Release()
	start := int32(10957) // 2000-01-01
	for i := 0; i < n; i++ {
		j := k + i
		bld.Field(0).(*array.StringBuilder).Append(ids[j%len(ids)])
		p := start + int32(((j/len(ids))%150)*31)
		if !revise {
			p = start + int32((150+j/len(ids))*31)
		}
		bld.Field(1).(*array.Date32Builder).Append(arrow.Date32(p))
		bld.Field(2).(*array.Float64Builder).Append(float64(j))
	}
	return bld.NewRecordBatch()
}
