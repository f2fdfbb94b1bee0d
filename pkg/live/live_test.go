package live

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/energyscope/servingsnap/pkg/wal"
)

// TestPutTooLarge: a write larger than the log's record limit is refused
// alone, before it is queued, with wal.ErrTooLarge; writes beside it,
// before and after, are logged and applied as if it had not been sent.
func TestPutTooLarge(t *testing.T) {
	s := testSchema(t)
	rng := rand.New(rand.NewPCG(1, 2))
	small, big := testWrite(s, rng, 10, 0), testWrite(s, rng, 5000, 100)
	defer small.Release()
	defer big.Release()
	smallBytes, err := encode(small)
	if err != nil {
		t.Fatal(err)
	}
	limit := 2 * len(smallBytes)
	recycle(smallBytes)
	tg := &nullTarget{}
	w, _, err := Open(t.TempDir(), s, 0, tg, Options{WAL: wal.Options{SegmentSize: 1 << 20, MaxRecordSize: limit}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = w.Put(ctx, small)
		})
	}
	_, bigErr := w.Put(ctx, big)
	wg.Wait()
	if !errors.Is(bigErr, wal.ErrTooLarge) {
		t.Fatalf("a %d-row write over a %d-byte record limit: %v, want ErrTooLarge", big.NumRows(), limit, bigErr)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("small write %d beside it: %v", i, err)
		}
	}
	if ack, err := w.Put(ctx, small); err != nil || ack.Rows != small.NumRows() {
		t.Fatalf("a write after it: %+v, %v", ack, err)
	}
	if st := w.Stats(); st.Writes != 9 || st.Rows != 9*small.NumRows() {
		t.Fatalf("stats %+v: want 9 writes of %d rows", st, small.NumRows())
	}
}
