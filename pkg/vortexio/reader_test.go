package vortexio

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestReadFixtures reads every reference-written fixture whole and checks
// it against the source table stored beside it.
func TestReadFixtures(t *testing.T) {
	for _, name := range fixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			f, err := OpenFile("testdata/" + name + ".vortex")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sc, want := readIPCFile(t, "testdata/"+name+".arrow")
			if f.NumRows() != int64(wantLen(want)) {
				t.Fatalf("rows %d, want %d", f.NumRows(), wantLen(want))
			}
			for i := range want {
				name := sc.Field(i).Name
				rec, err := f.ReadRange([]string{name}, 0, f.NumRows())
				if err != nil {
					t.Fatalf("column %s: %v", name, err)
				}
				sameArray(t, name, want[i], rec.Column(0))
				rec.Release()
			}
		})
	}
}

func wantLen(cols []arrow.Array) int {
	if len(cols) == 0 {
		return 0
	}
	return cols[0].Len()
}

// TestReadRanges reads random row ranges of single columns.
func TestReadRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, name := range []string{"lake_default", "lake_compact", "enc_runend", "enc_rle", "enc_bitpacked_patches", "enc_alp_patches", "enc_sparse", "nasty", "nasty_compact", "pco_compact"} {
		f, err := OpenFile("testdata/" + name + ".vortex")
		if err != nil {
			t.Fatal(err)
		}
		sc, want := readIPCFile(t, "testdata/"+name+".arrow")
		for k := 0; k < 20; k++ {
			a := rng.Int64N(f.NumRows())
			b := a + rng.Int64N(min(f.NumRows()-a, 400)+1)
			c := rng.IntN(len(want))
			rec, err := f.ReadRange([]string{sc.Field(c).Name}, a, b)
			if err != nil {
				t.Fatalf("%s [%d,%d): %v", name, a, b, err)
			}
			ws := sliceArr(want[c], a, b)
			sameArray(t, fmt.Sprintf("%s.%s[%d:%d]", name, sc.Field(c).Name, a, b), ws, rec.Column(0))
			rec.Release()
		}
		f.Close()
	}
}

// TestFixtureEncodingsCovered logs which encodings the fixtures exercise and
// fails if a tier-1 encoding that the fixtures are meant to cover is
// missing. The few that the reference writer does not emit for any fixture
// are listed in notInFixtures with the reason and where else they are
// exercised; an exclusion that a fixture does cover fails too, so the list
// cannot go stale.
func TestFixtureEncodingsCovered(t *testing.T) {
	all := map[string]int{}
	for _, name := range fixtureNames(t) {
		f, err := OpenFile("testdata/" + name + ".vortex")
		if err != nil {
			t.Fatal(err)
		}
		enc, err := f.Encodings()
		if err != nil {
			t.Fatal(err)
		}
		for e, c := range enc {
			all[e] += c
		}
		f.Close()
	}
	var ks []string
	for k := range all {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	t.Logf("encodings in fixtures: %s", strings.Join(ks, " "))
	for _, e := range tier1 {
		why, excluded := notInFixtures[e]
		switch {
		case all[e] == 0 && !excluded:
			t.Errorf("no fixture exercises %s", e)
		case all[e] > 0 && excluded:
			t.Errorf("%s is now in the fixtures: drop its exclusion (%s)", e, why)
		}
	}
}

// notInFixtures are tier-1 encodings that vortex-data 0.90 (the reference
// that writes the fixtures) emits for none of them, with the reason.
var notInFixtures = map[string]string{
	"vortex.struct": "the reference stores struct columns as a vortex.struct layout with one flat child per field, " +
		"never a struct array inside a flat segment (enc_struct holds bit-packing and bool), and so does our " +
		"writer; struct columns are read back through the layout by FuzzWriterRoundTrip and TestReadFixtures",
	"fastlanes.rle": "for enc_rle the reference picks vortex.sequence and bit-packing; no file here holds " +
		"fastlanes.rle, so its decoder is checked by no fixture",
}

var tier1 = []string{"vortex.primitive", "vortex.bool", "vortex.varbinview", "vortex.struct", "vortex.ext",
	"vortex.constant", "vortex.masked", "vortex.dict", "vortex.null", "fastlanes.bitpacked", "fastlanes.for",
	"vortex.runend", "vortex.sequence", "vortex.sparse", "vortex.zigzag", "fastlanes.rle", "vortex.alp",
	"vortex.alprd", "vortex.fsst", "vortex.pco"}
