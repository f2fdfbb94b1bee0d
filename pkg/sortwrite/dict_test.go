package sortwrite

import (
	"fmt"
	"sync"
	"testing"
)

// TestDictionaryInterns interns overlapping chunks from several workers at
// once, through the table's growth: every value gets one code, the codes
// are 0…n-1, values[code] is the value, and code finds each (and nothing
// else).
func TestDictionaryInterns(t *testing.T) {
	d := newDictionary()
	const workers, chunks, per = 4, 50, 3000
	var wg sync.WaitGroup
	got := make([]map[string]uint32, workers)
	for w := range workers {
		got[w] = map[string]uint32{}
		wg.Go(func() {
			for c := range chunks {
				local := make([]string, per)
				for i := range local {
					local[i] = fmt.Sprintf("series-%d", (c*977+i*31+w*7)%40000)
				}
				if c%7 == 0 {
					local[0] = "" // the empty value is a value
				}
				out := make([]uint32, per)
				if err := d.internLocal(local, out); err != nil {
					t.Error(err)
					return
				}
				for i, v := range local {
					if prev, ok := got[w][v]; ok && prev != out[i] {
						t.Errorf("%q: code %d, then %d", v, prev, out[i])
					}
					got[w][v] = out[i]
				}
			}
		})
	}
	wg.Wait()
	seen := map[uint32]string{}
	for _, m := range got {
		for v, c := range m {
			if int(c) >= len(d.values) || d.values[c] != v {
				t.Fatalf("%q has code %d, which holds %q", v, c, d.values[min(int(c), len(d.values)-1)])
			}
			if other, ok := seen[c]; ok && other != v {
				t.Fatalf("code %d for %q and %q", c, v, other)
			}
			seen[c] = v
			if c2, ok := d.code(v); !ok || c2 != c {
				t.Errorf("code(%q) = %d, %v; want %d", v, c2, ok, c)
			}
		}
	}
	if len(seen) != len(d.values) {
		t.Errorf("%d values, %d codes handed out", len(d.values), len(seen))
	}
	if _, ok := d.code("no such value"); ok {
		t.Error("code found a value never interned")
	}
	if len(d.slots) < 2*len(d.values) {
		t.Errorf("%d slots for %d values: more than half full", len(d.slots), len(d.values))
	}
}
