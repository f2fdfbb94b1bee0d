package roaring

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	ref "github.com/RoaringBitmap/roaring/v2"
	ref64 "github.com/RoaringBitmap/roaring/v2/roaring64"
)

// The reference implementation (RoaringBitmap/roaring, the Go port of the
// format's authors) serializes; this package must decode to the same set.

func refBytes32(t testing.TB, vals []uint32, runs bool) []byte {
	bm := ref.BitmapOf(vals...)
	if runs {
		bm.RunOptimize()
	}
	var buf bytes.Buffer
	if _, err := bm.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func refDelta(t testing.TB, vals []uint64, runs bool) []byte {
	bm := ref64.BitmapOf(vals...)
	if runs {
		bm.RunOptimize()
	}
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, uint32(DeltaMagic))
	if _, err := bm.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sets exercises array, bitmap and run containers, empty bitmaps, many
// containers (the offset header) and values in several 64-bit buckets.
func sets() map[string][]uint64 {
	r := rand.New(rand.NewPCG(1, 2))
	dense := []uint64{}
	for v := uint64(0); v < 70000; v++ {
		if r.IntN(3) == 0 {
			dense = append(dense, v)
		}
	}
	run := []uint64{}
	for v := uint64(100); v < 100+200000; v++ {
		run = append(run, v)
	}
	spread := []uint64{}
	for i := uint64(0); i < 20; i++ {
		spread = append(spread, i<<16|i, i<<16|(i+7))
	}
	return map[string][]uint64{
		"empty":   {},
		"one":     {0},
		"small":   {3, 4, 7, 11, 18, 29},
		"dense":   dense,
		"run":     run,
		"spread":  spread,
		"buckets": {1, 2, 1<<32 | 5, 3<<32 | 1, 3<<32 | 65536, 1<<40 | 9},
		"maxlow":  {0xFFFF, 0x1FFFF, 0xFFFFFFFF},
	}
}

func TestDecodeMatchesReference(t *testing.T) {
	for name, vals := range sets() {
		for _, runs := range []bool{false, true} {
			got, err := DecodeDelta(refDelta(t, vals, runs), 1<<30)
			if err != nil {
				t.Fatalf("%s runs=%v: %v", name, runs, err)
			}
			if !slices.Equal(got, vals) && !(len(got) == 0 && len(vals) == 0) {
				t.Fatalf("%s runs=%v: got %d values, want %d", name, runs, len(got), len(vals))
			}
			var low []uint32
			for _, v := range vals {
				if v>>32 == 0 {
					low = append(low, uint32(v))
				}
			}
			b := refBytes32(t, low, runs)
			got32, n, err := Decode32(b, 1<<30)
			if err != nil || n != len(b) || !slices.Equal(got32, low) && len(low) > 0 {
				t.Fatalf("%s runs=%v 32-bit: n=%d of %d, %d values want %d, err %v", name, runs, n, len(b), len(got32), len(low), err)
			}
		}
	}
}

func TestDecodeLimit(t *testing.T) {
	b := refDelta(t, sets()["run"], true) // a few bytes for 200,000 values
	if len(b) > 100 {
		t.Fatalf("run-optimized bitmap is %d bytes", len(b))
	}
	if _, err := DecodeDelta(b, 199999); !errors.Is(err, ErrLimit) {
		t.Fatalf("limit below the cardinality: %v, want ErrLimit", err)
	}
	if v, err := DecodeDelta(b, 200000); err != nil || len(v) != 200000 {
		t.Fatalf("limit at the cardinality: %d values, %v", len(v), err)
	}
}

func TestDecodeRejects(t *testing.T) {
	good := refDelta(t, []uint64{3, 4, 7}, false)
	cases := map[string][]byte{
		"short":        good[:3],
		"magic":        append([]byte{1, 2, 3, 4}, good[4:]...),
		"truncated":    good[:len(good)-1],
		"trailing":     append(slices.Clone(good), 0),
		"buckets":      append(append(slices.Clone(good[:4]), 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0), good[12:]...),
		"negative key": refDelta(t, []uint64{1 << 63}, false),
	}
	// An array container whose values are not ascending.
	bad := slices.Clone(good)
	copy(bad[len(bad)-6:], []byte{7, 0, 4, 0, 3, 0})
	cases["unsorted"] = bad
	for name, b := range cases {
		if _, err := DecodeDelta(b, 1<<20); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

func FuzzDecodeDelta(f *testing.F) {
	for _, vals := range sets() {
		if len(vals) < 5000 {
			f.Add(refDelta(f, vals, false))
			f.Add(refDelta(f, vals, true))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		vals, err := DecodeDelta(b, 1<<20)
		if err != nil {
			return
		}
		if !slices.IsSorted(vals) {
			t.Fatalf("values not ascending")
		}
		for i := 1; i < len(vals); i++ {
			if vals[i] == vals[i-1] {
				t.Fatalf("value %d twice", vals[i])
			}
		}
		// Whatever decodes must be what the reference reads from the same bytes.
		bm := ref64.New()
		if _, err := bm.ReadFrom(bytes.NewReader(b[4:])); err != nil {
			return // the reference is laxer in places and stricter in others
		}
		if uint64(len(vals)) != bm.GetCardinality() {
			t.Fatalf("decoded %d values, reference %d", len(vals), bm.GetCardinality())
		}
		it := bm.Iterator()
		for _, v := range vals {
			if w := it.Next(); w != v {
				t.Fatalf("value %d, reference %d", v, w)
			}
		}
	})
}

// The native format: a count, then per bitmap its size and a 32-bit
// bitmap, keyed by position.
func TestDecodeNative(t *testing.T) {
	b0 := refBytes32(t, []uint32{3, 4, 7}, false)
	b1 := refBytes32(t, []uint32{1, 70000}, true)
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, uint32(DeltaNativeMagic))
	binary.Write(&buf, binary.LittleEndian, uint32(2))
	for _, b := range [][]byte{b0, b1} {
		binary.Write(&buf, binary.LittleEndian, uint32(len(b)))
		buf.Write(b)
	}
	got, err := DecodeDelta(buf.Bytes(), 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{3, 4, 7, 1<<32 | 1, 1<<32 | 70000}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
