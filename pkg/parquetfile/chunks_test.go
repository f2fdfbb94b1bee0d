package parquetfile

import (
	"bytes"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// sample writes a Parquet file of two int64 columns in two row groups,
// large enough that its pages dwarf its footer.
func sample(t *testing.T) []byte {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: "b", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := 0; i < 50000; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i) * 7919)
		b.Field(1).(*array.Int64Builder).Append(int64(i) * 104729)
	}
	rec := b.NewRecord()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(25000), parquet.WithDictionaryDefault(false)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestCheckChunks(t *testing.T) {
	good := sample(t)
	// Dropping page bytes after the leading magic keeps the footer readable
	// while the last chunks' absolute ranges now run past the file's end.
	const cut = 64 << 10
	short := append(append([]byte{}, good[:4]...), good[4+cut:]...)
	for _, tc := range []struct {
		name string
		data []byte
		want string // "" for no error
	}{
		{"whole file", good, ""},
		{"pages cut out", short, "row group 1 column 1 (b): chunk at offset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pf, err := file.NewParquetReader(bytes.NewReader(tc.data))
			if err != nil {
				t.Fatalf("footer: %v", err)
			}
			defer pf.Close()
			err = CheckChunks(pf)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckChunks = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckChunks = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
