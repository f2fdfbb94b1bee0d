package deltalog

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/energyscope/servingsnap/pkg/parquetfile"
)

// actionColumns are the checkpoint columns read; each row sets one of them.
var actionColumns = []string{"add", "remove", "metaData", "protocol", "sidecar", "checkpointMetadata"}

// skipFields are struct fields of checkpoint actions this reader has no
// use for (statistics, tags): they are not converted.
var skipFields = map[string]bool{"stats": true, "stats_parsed": true, "partitionValues_parsed": true, "tags": true}

// readParquetActions reads the actions of a Parquet checkpoint or sidecar.
// Malformed files are errors, never panics.
func readParquetActions(ctx context.Context, r parquet.ReaderAtSeeker) (acts []Action, err error) {
	defer func() {
		if p := recover(); p != nil {
			acts, err = nil, fmt.Errorf("malformed Parquet file: %v", p)
		}
	}()
	pf, err := file.NewParquetReader(r)
	if err != nil {
		return nil, fmt.Errorf("not a readable Parquet file: %w", err)
	}
	defer pf.Close()
	if err := parquetfile.CheckChunks(pf); err != nil {
		return nil, err
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 4096}, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	sc, err := fr.Schema()
	if err != nil {
		return nil, err
	}
	var cols, leaves []int
	var names []string
	for i, f := range sc.Fields() {
		for _, n := range actionColumns {
			if f.Name == n {
				cols = append(cols, i)
				names = append(names, n)
				leaves = appendLeaves(leaves, &fr.Manifest.Fields[i])
			}
		}
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("no action columns (add, remove, metaData, protocol, ...)")
	}
	rr, err := fr.GetRecordReader(ctx, leaves, nil)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	row := 0
	for rr.Next() {
		rec := rr.RecordBatch()
		if int(rec.NumCols()) != len(names) {
			return nil, fmt.Errorf("read %d action columns, want %d", rec.NumCols(), len(names))
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			var found []byte
			for c := range names {
				col := rec.Column(c)
				if col.IsNull(i) {
					continue
				}
				if found != nil {
					return nil, fmt.Errorf("row %d sets more than one action", row)
				}
				b, err := json.Marshal(map[string]any{names[c]: toGo(col, i)})
				if err != nil {
					return nil, fmt.Errorf("row %d: %w", row, err)
				}
				found = b
			}
			if found != nil {
				a, err := parseAction(found)
				if err != nil {
					return nil, fmt.Errorf("row %d: %w", row, err)
				}
				acts = append(acts, a)
			}
			row++
		}
	}
	if err := rr.Err(); err != nil {
		return nil, err
	}
	return acts, nil
}

// toGo converts one value of a checkpoint column to what encoding/json
// makes of the same action in a commit: structs become objects, maps
// objects keyed by string, lists arrays. Types an action never has are
// dropped (nil).
func toGo(arr arrow.Array, i int) any {
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		m := make(map[string]any, a.NumField())
		for j := 0; j < a.NumField(); j++ {
			name := st.Field(j).Name
			if skipFields[name] {
				continue
			}
			m[name] = toGo(a.Field(j), i)
		}
		return m
	case *array.Map:
		start, end := a.ValueOffsets(i)
		keys, items := a.Keys(), a.Items()
		m := make(map[string]any, end-start)
		for j := int(start); j < int(end); j++ {
			k, ok := toGo(keys, j).(string)
			if !ok {
				continue
			}
			m[k] = toGo(items, j)
		}
		return m
	case *array.List:
		start, end := a.ValueOffsets(i)
		out := make([]any, 0, end-start)
		for j := int(start); j < int(end); j++ {
			out = append(out, toGo(a.ListValues(), j))
		}
		return out
	case *array.LargeList:
		start, end := a.ValueOffsets(i)
		out := make([]any, 0, end-start)
		for j := int(start); j < int(end); j++ {
			out = append(out, toGo(a.ListValues(), j))
		}
		return out
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.StringView:
		return a.Value(i)
	case *array.Binary:
		return string(a.Value(i))
	case *array.Int8:
		return a.Value(i)
	case *array.Int16:
		return a.Value(i)
	case *array.Int32:
		return a.Value(i)
	case *array.Int64:
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.Float32:
		return a.Value(i)
	}
	return nil
}

// appendLeaves appends the leaf column indices below a schema field.
func appendLeaves(dst []int, f *pqarrow.SchemaField) []int {
	if f.IsLeaf() {
		return append(dst, f.ColIndex)
	}
	for i := range f.Children {
		dst = appendLeaves(dst, &f.Children[i])
	}
	return dst
}
