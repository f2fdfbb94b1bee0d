package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/corrupt"
)

// firstAttr is the first attribute column of a version-5 index without
// tiers.
const firstAttr = NumFixed + NumLookup

// TestBucketIsXXH64: the bucket function is the one FORMAT.md §4 gives, on
// hashes any XXH64 implementation reproduces (these are the reference
// implementation's, seed 0; tests/interop checks a whole table with the
// Python binding of it).
func TestBucketIsXXH64(t *testing.T) {
	for _, tc := range []struct {
		id   string
		hash uint64
	}{
		{"", 0xef46db3751d8e999},
		{"a", 0xd24ec4f1a98c6e5b},
		{"abc", 0x44bc2cf5ad770999},
	} {
		for _, n := range []int{1, 7, 1000, 2_820_000} {
			if got, want := Bucket(tc.id, n), int((tc.hash>>32)*uint64(n)>>32); got != want {
				t.Errorf("Bucket(%q, %d) = %d, want %d", tc.id, n, got, want)
			}
		}
	}
}

// lookupIndex writes an index of n series with ids made by id.
func lookupIndex(t *testing.T, n int, id func(int) string) *Reader {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = id(i)
	}
	slices.Sort(ids)
	units := make([]string, n)
	for i := range units {
		units[i] = "u"
	}
	col := strs(memory.DefaultAllocator, units...)
	defer col.Release()
	return writeIndexIDs(t, ids, col)
}

// TestLookupTable: at every size, from an empty index to one with more
// series than a bucket's worth of collisions, each id is found through
// the table alone (find) at its code, an absent id is not, and the table
// passes CheckLookup with each bucket's codes increasing.
func TestLookupTable(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 17, 1000, 5000} {
		for _, shape := range []struct {
			name string
			id   func(int) string
		}{
			{"numbered", func(i int) string { return fmt.Sprintf("S%06d", i) }},
			{"eia-like", func(i int) string { return fmt.Sprintf("PET.EMM_EPM%d_PTE_%c.%c", i/26, 'A'+i%26, "AMQW"[i%4]) }},
		} {
			t.Run(fmt.Sprintf("%s/%d", shape.name, n), func(t *testing.T) {
				x := lookupIndex(t, n, shape.id)
				if x.Version() != Version || len(x.lookup.code) != n || len(x.lookup.start) != n {
					t.Fatalf("version %s, table %d/%d rows for %d series", x.Version(), len(x.lookup.start), len(x.lookup.code), n)
				}
				if err := x.CheckLookup(); err != nil {
					t.Fatal(err)
				}
				for i := range n {
					if c, ok := x.find(x.ID(i)); !ok || c != i {
						t.Fatalf("find(%q) = %d, %v; want %d", x.ID(i), c, ok, i)
					}
				}
				absent := []string{"", "S", "zzz", shape.id(n) + "x"}
				for _, id := range absent {
					if c, ok := x.Lookup(id); ok {
						t.Errorf("Lookup(%q) = %d, want not found", id, c)
					}
				}
				checkLookupMany(t, x, absent)
				x.lookup = lookupTable{} // as an index before version 5
				checkLookupMany(t, x, absent)
			})
		}
	}
}

// checkLookupMany: LookupMany over every id of x, shuffled, with repeats
// and the absent ids mixed in, answers what Lookup answers, one by one.
func checkLookupMany(t *testing.T, x *Reader, absent []string) {
	t.Helper()
	var ids []string
	for i := range x.Len() {
		ids = append(ids, x.ID((i*7919)%x.Len()), x.ID(i))
	}
	ids = append(ids, absent...)
	codes := make([]int32, len(ids))
	x.LookupMany(ids, codes)
	for i, id := range ids {
		c, ok := x.Lookup(id)
		if want := lookupCode(c, ok); codes[i] != want {
			t.Fatalf("LookupMany: %q at %d, Lookup says %d", id, codes[i], want)
		}
	}
}

// TestLookupDamaged: a damaged table never changes an answer (Lookup falls
// back to the binary search and compares ids), and CheckLookup reports
// each kind of damage, marked corrupt, naming the column.
func TestLookupDamaged(t *testing.T) {
	const n = 300
	for _, tc := range []struct {
		name string
		harm func(start, code []uint32)
		want string
	}{
		{"first bucket not at 0", func(s, c []uint32) { s[0] = 1 }, `"lookup_start": the first bucket starts at 1`},
		{"start past the table", func(s, c []uint32) { s[n/2] = n + 5 }, `"lookup_start": bucket`},
		{"starts decrease", func(s, c []uint32) { s[n/2], s[n/2+1] = s[n/2+1]+1, s[n/2] }, `index column "lookup_`},
		{"code past the series", func(s, c []uint32) { c[7] = n }, `"lookup_code": row 7 holds code 300`},
		{"every code past the series", func(s, c []uint32) {
			for i := range c {
				c[i] = n + uint32(i)
			}
		}, `"lookup_code": row 0 holds code 300`},
		{"code twice", func(s, c []uint32) { c[8] = c[40] }, `"lookup_code": row`},
		{"codes swapped across buckets", func(s, c []uint32) { c[10], c[200] = c[200], c[10] }, `hashes to`},
		{"everything zero", func(s, c []uint32) { clear(s); clear(c) }, `its id hashes to`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := lookupIndex(t, n, func(i int) string { return fmt.Sprintf("ELEC.GEN.%04d.M", i) })
			// The mapped file is read-only: damage a copy of the table.
			x.lookup.start, x.lookup.code = slices.Clone(x.lookup.start), slices.Clone(x.lookup.code)
			tc.harm(x.lookup.start, x.lookup.code)
			for i := range n {
				if c, ok := x.Lookup(x.ID(i)); !ok || c != i {
					t.Fatalf("Lookup(%q) = %d, %v with a damaged table; want %d", x.ID(i), c, ok, i)
				}
			}
			if c, ok := x.Lookup("ELEC.GEN.9999.M"); ok {
				t.Errorf("an absent id found at %d", c)
			}
			checkLookupMany(t, x, []string{"ELEC.GEN.9999.M", ""})
			err := x.Check()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, corrupt.ErrCorrupt) {
				t.Fatalf("Check = %v, want a corrupt error saying %s", err, tc.want)
			}
		})
	}
}

// BenchmarkLookup: finding 1,000 random series among 200,000 (ids of the
// generator's shape) through the table and by binary search alone.
func BenchmarkLookup(b *testing.B) {
	const n = 200_000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("PET.EMM_EPM%d_PTE_%c.%c", i/26, 'A'+i%26, "AMQW"[i%4])
	}
	slices.Sort(ids)
	units := make([]string, n)
	col := strs(memory.DefaultAllocator, units...)
	defer col.Release()
	x := writeIndexIDs(b, ids, col)
	probe := make([]string, 1000)
	for i := range probe {
		probe[i] = ids[(i*7919)%n]
	}
	b.Run("table", func(b *testing.B) {
		for b.Loop() {
			for _, id := range probe {
				x.Lookup(id)
			}
		}
	})
	b.Run("search", func(b *testing.B) {
		for b.Loop() {
			for _, id := range probe {
				x.search(id)
			}
		}
	})
}

// FuzzLookupTable: whatever bytes a version-5 index's lookup columns hold
// (the file is outside input), Lookup and LookupMany neither panic nor
// answer anything but the right code, and CheckLookup accepts the table
// only when it is the one the writer makes.
func FuzzLookupTable(f *testing.F) {
	const n = 64
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("NG.N%04d.M", i*37)
	}
	slices.Sort(ids)
	units := strs(memory.DefaultAllocator, slices.Repeat([]string{"u"}, n)...)
	defer units.Release()
	x := writeIndexIDs(f, ids, units)
	want := append(slices.Clone(x.lookup.start), x.lookup.code...)
	good := make([]byte, 0, 8*n)
	for _, v := range want {
		good = binary.LittleEndian.AppendUint32(good, v)
	}
	f.Add(good)
	f.Add(make([]byte, 8*n))
	f.Add(bytes.Repeat([]byte{0xff}, 8*n))
	f.Fuzz(func(t *testing.T, b []byte) {
		table := make([]uint32, 2*n)
		for i := range table {
			if 4*i+4 <= len(b) {
				table[i] = binary.LittleEndian.Uint32(b[4*i:])
			}
		}
		y, err := New(x.Record())
		if err != nil {
			t.Fatal(err)
		}
		y.lookup = lookupTable{start: table[:n], code: table[n:]}
		probe := append(slices.Clone(ids), "", "NG.N", "NG.N9999.M")
		codes := make([]int32, len(probe))
		y.LookupMany(probe, codes)
		for i, id := range probe {
			c, ok := y.Lookup(id)
			want := int32(-1)
			if i < n {
				want = int32(i)
			}
			if got := lookupCode(c, ok); got != want || codes[i] != want {
				t.Fatalf("%q: Lookup %d, LookupMany %d, want %d", id, got, codes[i], want)
			}
		}
		if err, same := y.CheckLookup(), slices.Equal(table, want); (err == nil) != same {
			t.Fatalf("CheckLookup = %v; the table is the writer's: %v", err, same)
		}
	})
}
