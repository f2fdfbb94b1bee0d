package snapwrite

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// pipeBatch is a one-row batch holding v, from mem.
func pipeBatch(mem memory.Allocator, v int32) arrow.RecordBatch {
	b := array.NewInt32Builder(mem)
	defer b.Release()
	b.Append(v)
	col := b.NewArray()
	defer col.Release()
	sc := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int32}}, nil)
	return array.NewRecordBatch(sc, []arrow.Array{col}, 1)
}

func TestPipe(t *testing.T) {
	errDisk := errors.New("no space left on device")
	for _, tc := range []struct {
		name   string
		failAt int // the write that fails (0: none)
		cancel int // the parent context is cancelled before this send (0: never)
		// what Close returns and the batches written, in order
		want    error
		written string
		// at most this many batches are sent (Send returning nil) in all
		maxSent int
	}{
		{name: "every batch written in order", want: nil, written: "[0 1 2 3 4 5 6 7 8 9]", maxSent: 10},
		// A failed write stops the maker within two sends: one batch may
		// sit in the channel, one was being written.
		{name: "a failed write stops the maker", failAt: 3, want: errDisk, written: "[0 1]", maxSent: 5},
		{name: "a failed first write", failAt: 1, want: errDisk, written: "[]", maxSent: 3},
		{name: "the parent context cancelled", cancel: 4, want: context.Canceled, written: "[0 1 2 3]", maxSent: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var written []int32
			calls := 0
			p := NewPipe(ctx, func(rec arrow.RecordBatch) error {
				calls++
				if calls == tc.failAt {
					return errDisk
				}
				written = append(written, rec.Column(0).(*array.Int32).Value(0))
				return nil
			})
			sent := 0
			var err error
			for i := 0; i < 10 && err == nil; i++ {
				if i == tc.cancel && tc.cancel > 0 {
					cancel()
				}
				if err = p.Context().Err(); err != nil {
					break
				}
				if err = p.Send(pipeBatch(mem, int32(i))); err == nil {
					sent++
				}
			}
			got := p.Close(err)
			if !errors.Is(got, tc.want) {
				t.Fatalf("Close: %v, want %v", got, tc.want)
			}
			if sent > tc.maxSent {
				t.Errorf("%d batches sent, want at most %d", sent, tc.maxSent)
			}
			if fmt.Sprint(written) != tc.written {
				t.Errorf("written %v, want %s", written, tc.written)
			}
		})
	}
}
