package serve

import (
	"fmt"
	"testing"
)

// TestCodeCache: the cache answers as the index does, for series the base
// has and ones it lacks, before and after its read map is rebuilt (more
// misses than the rebuild threshold), asked once and again.
func TestCodeCache(t *testing.T) {
	srv := startServer(t, Config{})
	d := srv.svc.datasets["SYN"]
	v := d.acquire()
	defer v.Release()
	x := v.Index()
	c := d.codes(x)
	if d.codes(x) != c {
		t.Fatal("a second call made another cache for the same index")
	}
	var ids []string
	for i := 0; i < x.Len(); i++ {
		ids = append(ids, x.SeriesID(i))
	}
	for i := 0; i < 5000; i++ { // beyond the 4096 misses that rebuild it
		ids = append(ids, fmt.Sprintf("absent-%d", i))
	}
	for pass := 0; pass < 3; pass++ {
		r := c.reader()
		for _, id := range ids {
			want, wok := x.Lookup(id)
			got, ok := r.lookup(id)
			if ok != wok || (ok && got != want) {
				t.Fatalf("pass %d, %q: (%d, %v), the index says (%d, %v)", pass, id, got, ok, want, wok)
			}
		}
	}
	if n := len(*c.read.Load()); n < 4096 {
		t.Fatalf("read map holds %d series after %d misses: never rebuilt", n, len(ids))
	}
}

// TestCodeCacheGrows: from a table of 2 slots the cache grows many times
// while several goroutines fill it at once (tags collide in so small a
// table, so a probe must confirm the id), and every answer, then and
// after, is the index's.
func TestCodeCacheGrows(t *testing.T) {
	srv := startServer(t, Config{})
	d := srv.svc.datasets["SYN"]
	v := d.acquire()
	defer v.Release()
	x := v.Index()
	c := newCodeCacheSlots(x, 2)
	var ids []string
	for i := 0; i < x.Len(); i++ {
		ids = append(ids, x.SeriesID(i), fmt.Sprintf("absent-%d", i))
	}
	check := func(from int) error {
		r := c.reader()
		for k := range ids {
			id := ids[(from+k)%len(ids)]
			want, wok := x.Lookup(id)
			got, ok := r.lookup(id)
			if ok != wok || (ok && got != want) {
				return fmt.Errorf("%q: (%d, %v), the index says (%d, %v)", id, got, ok, want, wok)
			}
		}
		return nil
	}
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() { errs <- check(g * 97) }()
	}
	for g := 0; g < 4; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := check(0); err != nil {
		t.Fatal(err)
	}
	tab := c.tab.Load()
	if len(tab.slots) < 2*x.Len() || tab.n.Load() < int64(x.Len()) {
		t.Fatalf("table of %d slots holds %d of %d series: did not grow to hold them", len(tab.slots), tab.n.Load(), x.Len())
	}
}

// TestBaseCodeNear: from every hint, for every series of the base (before
// the hint, at it, just after, beyond the gallop's span) and for ids the
// base lacks (before, between and after its ids), the answer is the
// index's.
func TestBaseCodeNear(t *testing.T) {
	srv := startServer(t, Config{})
	d := srv.svc.datasets["SYN"]
	v := d.acquire()
	defer v.Release()
	x := v.Index()
	k := newPutKnown(d, v)
	ids := []string{"", "\x00", "zzzz-after-all"}
	for i := 0; i < x.Len(); i++ {
		ids = append(ids, x.SeriesID(i), x.SeriesID(i)+"\x00")
	}
	for _, hint := range []int{0, 1, x.Len() / 2, x.Len() - 2, x.Len() - 1, x.Len(), -1} {
		for _, id := range ids {
			want, wok := x.Lookup(id)
			got, ok := k.BaseCodeNear(id, hint)
			if ok != wok || (ok && got != want) {
				t.Fatalf("hint %d, %q: (%d, %v), the index says (%d, %v)", hint, id, got, ok, want, wok)
			}
		}
	}
}
