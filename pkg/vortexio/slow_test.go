package vortexio

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

func TestFindSlow(t *testing.T) {
	if os.Getenv("FINDSLOW") == "" {
		t.Skip()
	}
	rng := rand.New(rand.NewPCG(3, 4))
	names := fixtureNames(t)
	for it := 0; it < 20000; it++ {
		b, _ := os.ReadFile("testdata/" + names[rng.IntN(len(names))] + ".vortex")
		for k := 0; k < 1+rng.IntN(4); k++ {
			b[rng.IntN(len(b))] = byte(rng.Uint32())
		}
		start := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			vf, err := Open(bytes.NewReader(b), int64(len(b)), Options{MaxChunkRows: 1 << 16, MaxSegmentBytes: 1 << 22})
			if err != nil {
				return
			}
			var buf bytes.Buffer
			_ = Describe(&buf, vf)
			for a := int64(0); a < vf.NumRows() && a < 1<<18; a += 4096 {
				rec, err := vf.ReadRange(nil, a, min(a+4096, vf.NumRows()))
				if err != nil {
					return
				}
				rec.Release()
			}
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			os.WriteFile("/tmp/slow.vortex", b, 0o644)
			t.Fatalf("slow input after %v", time.Since(start))
		}
	}
}
