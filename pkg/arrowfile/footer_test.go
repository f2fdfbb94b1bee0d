package arrowfile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// sampleFile is a small IPC file with nested and dictionary fields, so the
// footer has children, dictionaries and metadata to damage.
func sampleFile(t testing.TB) []byte {
	md := arrow.NewMetadata([]string{"k"}, []string{"v"})
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Uint32},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	}, &md)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	b.Field(0).(*array.Uint32Builder).AppendValues([]uint32{1, 2, 3}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"a", "", "c"}, []bool{true, false, true})
	lb := b.Field(2).(*array.ListBuilder)
	for i := 0; i < 3; i++ {
		lb.Append(true)
		lb.ValueBuilder().(*array.Int64Builder).Append(int64(i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(sc))
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

func TestCheckFooter(t *testing.T) {
	good := sampleFile(t)
	if err := CheckFooter(bytes.NewReader(good), int64(len(good))); err != nil {
		t.Fatalf("a valid file fails: %v", err)
	}
	// Every single-byte change of the footer either passes the check and
	// then opens without panicking, or is refused; arrow-go never sees a
	// length it would allocate blindly (a fatal out-of-memory, not a panic).
	footerLen := int(int32(uint32(good[len(good)-10]) | uint32(good[len(good)-9])<<8 | uint32(good[len(good)-8])<<16 | uint32(good[len(good)-7])<<24))
	refused := 0
	for i := len(good) - 10 - footerLen; i < len(good); i++ {
		for _, x := range []byte{0xff, 0x7f, 0x01} {
			bad := bytes.Clone(good)
			bad[i] ^= x
			if CheckFooter(bytes.NewReader(bad), int64(len(bad))) != nil {
				refused++
				continue
			}
			if p := footerPanic(bad); p != nil {
				t.Errorf("byte %d ^= %#x: CheckFooter accepts a footer that makes arrow-go panic: %v", i, x, p)
			}
			openBytes(t, bad)
		}
	}
	t.Logf("%d of %d footer byte changes refused", refused, 3*(footerLen+10))
	if refused == 0 {
		t.Fatal("no damaged footer was refused")
	}
}

// openBytes loads b as a file through this package; errors are fine,
// panics are not (Load recovers them into errors).
func openBytes(t testing.TB, b []byte) {
	p := filepath.Join(t.TempDir(), "x.arrow")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := Load(p); err == nil {
		for i := 0; i < m.Reader.NumRecords(); i++ {
			if rec, err := m.Batch(i); err == nil {
				rec.Release()
			}
		}
		m.Close()
	}
}

// FuzzCheckFooter: whatever the bytes, CheckFooter does not panic, and a
// file it accepts is one arrow-go parses without panicking: its footer and
// schema are read by ipc.NewFileReader directly, outside the recover that
// Load puts around it, so a panic CheckFooter should have prevented fails
// the target instead of turning into an error. Record batch messages are
// not the footer's business (Batch recovers what their bytes cause), so
// they are read through this package as before.
func FuzzCheckFooter(f *testing.F) {
	good := sampleFile(f)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		if CheckFooter(bytes.NewReader(b), int64(len(b))) != nil {
			return
		}
		if p := footerPanic(b); p != nil {
			t.Fatalf("CheckFooter accepted a file whose footer makes arrow-go panic: %v", p)
		}
		openBytes(t, b)
	})
}

// footerPanic opens b with arrow-go's file readers (the copying one Load
// uses and the zero-copy one Map uses) and returns what they panicked
// with, if anything. Errors are fine.
func footerPanic(b []byte) (p any) {
	defer func() { p = recover() }()
	if rd, err := ipc.NewFileReader(bytes.NewReader(b), ipc.WithBodySizeLimit(BodySizeLimit)); err == nil {
		_ = rd.Schema()
		rd.Close()
	}
	if rd, err := ipc.NewMappedFileReader(b, ipc.WithBodySizeLimit(BodySizeLimit)); err == nil {
		rd.Close()
	}
	return nil
}
