package query_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// BenchmarkCompositeLatestValues is `latest` of 1000 series spread over a
// base of 100k series × 150 periods with a delta of 300k rows touching
// every series (a revision and two appended periods each, in three runs):
// the latest answer's read side with a live delta.
func BenchmarkCompositeLatestValues(b *testing.B) {
	root := testsnap.Uniform(b, 100_000, 150)
	s, err := snapshot.Open(filepath.Join(root, "B"), snapshot.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	base, err := query.FromSnapshot("B", s)
	if err != nil {
		b.Fatal(err)
	}
	fields, _ := s.Index().Attributes()
	sc, err := livedelta.NewSchema(s.Schema(), fields)
	if err != nil {
		b.Fatal(err)
	}
	mem := memory.NewGoAllocator()
	ids := testlake.UniformIDs(100_000)
	st := livedelta.Empty(sc)
	for k, w := range []struct {
		from   int
		revise bool
	}{{0, true}, {0, false}, {100_000, false}} {
		rec := testlake.UniformBatch(ids, w.from, 100_000, w.revise)
		norm, err := livedelta.Normalize(context.Background(), mem, sc, rec, k, base)
		rec.Release()
		if err != nil {
			b.Fatal(err)
		}
		if st, err = st.Append(context.Background(), mem, norm, uint64(k+1), uint64(k+1), base); err != nil {
			b.Fatal(err)
		}
		norm.Release()
	}
	c := query.NewComposite(base, st)
	codes := make([]int32, 1000)
	for i := range codes {
		codes[i] = int32(i * 100)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a, err := c.LatestValues(context.Background(), codes, mem)
		if err != nil {
			b.Fatal(err)
		}
		a.Release()
	}
}
