package livedelta

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestMergePacedMatchesMerge: a merge that pauses at every chunk of rows
// (the pacer's clock check off) gives the run an unpaused merge gives,
// and pauses about once per paceRows rows of work.
func TestMergePacedMatchesMerge(t *testing.T) {
	ctx := context.Background()
	mem := memory.DefaultAllocator // (runs are never released: the GC frees them)
	s := testSchema(t)
	base := newFakeBase(20_000, 6)
	rng := rand.New(rand.NewPCG(7, 11))
	st := Empty(s)
	writes, givens := randomWrites(rng, base, MergeFanIn, 3*paceRows)
	total := 0
	for i, rows := range writes {
		rec := write(s, rows, givens[i])
		next, err := st.Append(ctx, mem, rec, uint64(i+1), uint64(i+1), base)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		st = next
		total += len(rows)
	}
	rs := st.Runs()
	want, err := mergeRuns(ctx, mem, s, rs, nil)
	if err != nil {
		t.Fatal(err)
	}
	pauses := 0
	got, err := mergeRuns(ctx, mem, s, rs, &pacer{pause: func() { pauses++ }})
	if err != nil {
		t.Fatal(err)
	}
	sameRun(t, got, want)
	if min := total / paceRows; pauses < min {
		t.Errorf("%d pauses merging %d rows; want at least %d", pauses, total, min)
	}
}

// TestPacerClock: a pacer pauses only once its interval has passed, and
// a nil one (a merge without a pause) does nothing.
func TestPacerClock(t *testing.T) {
	var nilp *pacer
	nilp.step(10 * paceRows)
	pauses := 0
	p := newPacer(func() { pauses++ })
	p.every = 1 << 62 // never due
	p.step(10 * paceRows)
	if pauses != 0 {
		t.Fatalf("%d pauses before the interval passed", pauses)
	}
	p.every = 0
	p.step(paceRows - 1)
	if pauses != 0 {
		t.Fatalf("%d pauses before paceRows rows", pauses)
	}
	p.step(1)
	if pauses != 1 {
		t.Fatalf("%d pauses after paceRows rows; want 1", pauses)
	}
}
