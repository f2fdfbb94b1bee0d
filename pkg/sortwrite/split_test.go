package sortwrite

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testiceberg"
	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/lakegen"
	"github.com/energyscope/servingsnap/pkg/shard"
)

// splitAll runs every part of a split of lake into dir.
func splitAll(t *testing.T, lake, dir string, shards, parts int, mod func(*Options)) []*SplitSummary {
	t.Helper()
	var out []*SplitSummary
	for j := range parts {
		opt := Options{Input: lake, Parallel: 2, Shard: shard.Spec{Count: shards}}
		if mod != nil {
			mod(&opt)
		}
		s, err := Split(context.Background(), opt, SplitPart{Index: j, Count: parts}, dir)
		if err != nil {
			t.Fatalf("split part %d/%d: %v", j, parts, err)
		}
		out = append(out, s)
	}
	return out
}

// writeAttrLake writes a lake whose column "note" is constant within each
// file for every series but changes between the first and last file (so
// it is no attribute), whose "unit" is an attribute, and whose last file
// revises a row of the first (a duplicate across parts).
func writeAttrLake(t *testing.T, dir string) {
	t.Helper()
	ids := []string{"A", "B", "C", "D", "E", "F", "G", "H"}
	for f := range 4 {
		var sid, per, units, notes []any
		var vals []float64
		for i, id := range ids {
			for k := range 3 {
				sid = append(sid, id)
				per = append(per, fmt.Sprintf("%d", 2000+f*3+k))
				vals = append(vals, float64(f*100+i*10+k))
				units = append(units, "u-"+id)
				notes = append(notes, fmt.Sprintf("note-%d", f/2))
			}
		}
		if f == 3 { // revises A's first row of file 0
			sid, per, vals = append(sid, "A"), append(per, "2000"), append(vals, -1)
			units, notes = append(units, "u-A"), append(notes, "note-1")
		}
		testlake.WriteParquet(t, dir, fmt.Sprintf("part-%d.parquet", f), 5,
			testlake.Col{Name: "series_id", Vals: sid},
			testlake.Col{Name: "period", Vals: per},
			testlake.Col{Name: "value", Vals: testlake.Floats(vals...)},
			testlake.Col{Name: "unit", Vals: units},
			testlake.Col{Name: "note", Vals: notes})
	}
}

// TestSplitMatchesShardBuild: every shard built from its pieces holds the
// very bytes of the same shard built from the lake (in memory, and by the
// external sort), and the shards' rows together are the unsharded build's.
func TestSplitMatchesShardBuild(t *testing.T) {
	root := t.TempDir()
	gen := filepath.Join(root, "gen")
	if _, err := lakegen.Generate(context.Background(), lakegen.Options{Out: gen, Series: 800, Seed: 5, RowGroupRows: 3000, FilesPerYear: 2}); err != nil {
		t.Fatal(err)
	}
	attr := filepath.Join(root, "attr")
	writeAttrLake(t, attr)
	// Spark's Delta table: deletion vectors, column mapping, partition
	// values from the log.
	delta := filepath.Join("..", "..", "testdata", "delta", "spark_dv")
	for _, tc := range []struct {
		name          string
		lake          string
		shards, parts int
		hash          string
		splitMemory   int64 // 0: the default; small: several runs per part
		dup           string
	}{
		{name: "gen-4x4", lake: gen, shards: 4, parts: 4},
		{name: "gen-3x2-runs", lake: gen, shards: 3, parts: 2, splitMemory: 2 << 20},
		{name: "gen-2x5-bucket", lake: gen, shards: 2, parts: 5, hash: shard.HashIcebergBucket},
		{name: "attr-2x3-last", lake: attr, shards: 2, parts: 3, dup: OnDuplicateLast},
		{name: "attr-3x6-more-parts-than-files", lake: attr, shards: 3, parts: 6, dup: OnDuplicateLast},
		{name: "delta-2x2", lake: delta, shards: 2, parts: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(root, tc.name)
			sums := splitAll(t, tc.lake, filepath.Join(dir, "split"), tc.shards, tc.parts, func(o *Options) {
				o.MemoryLimit = tc.splitMemory
				o.OnDuplicate = tc.dup
				o.Shard.Hash = tc.hash
			})
			var splitRows int64
			for _, s := range sums {
				splitRows += s.Rows
			}
			whole := filepath.Join(dir, "WHOLE")
			ws, err := build(t, tc.lake, whole, func(o *Options) { o.OnDuplicate = tc.dup })
			if err != nil {
				t.Fatal(err)
			}
			if splitRows != ws.Rows+ws.DuplicatesDropped {
				t.Errorf("the parts read %d rows, the lake holds %d", splitRows, ws.Rows+ws.DuplicatesDropped)
			}
			_, want, _ := readBack(t, whole)
			union := map[string][]seriesRow{}
			for i := range tc.shards {
				spec := shard.Spec{Index: i, Count: tc.shards, Hash: tc.hash}
				ref := filepath.Join(dir, fmt.Sprint("LAKE", i))
				if _, err := build(t, tc.lake, ref, func(o *Options) { o.Shard = spec; o.OnDuplicate = tc.dup }); err != nil {
					t.Fatal(err)
				}
				ext := filepath.Join(dir, fmt.Sprint("EXT", i))
				es, err := build(t, tc.lake, ext, func(o *Options) { o.Shard = spec; o.OnDuplicate = tc.dup; o.MemoryLimit = 2 << 20 })
				if err != nil {
					t.Fatal(err)
				}
				if !es.External {
					t.Fatal("the shard build under 2 MiB should use the external sort")
				}
				got := filepath.Join(dir, fmt.Sprint("SPLIT", i))
				ss, err := build(t, "", got, func(o *Options) {
					o.Shard = spec
					o.OnDuplicate = tc.dup
					o.FromSplit = filepath.Join(dir, "split")
				})
				if err != nil {
					t.Fatal(err)
				}
				sameSnapshot(t, ref, got)
				sameSnapshot(t, ref, ext)
				mr, _, _ := readBack(t, ref)
				mg, rows, _ := readBack(t, got)
				if !reflect.DeepEqual(mr.Lineage, mg.Lineage) || !reflect.DeepEqual(mr.Shard, mg.Shard) {
					t.Errorf("shard %d: lineage or shard differ:\nlake  %+v %+v\nsplit %+v %+v", i, mr.Lineage, mr.Shard, mg.Lineage, mg.Shard)
				}
				if ss.BytesRead <= 0 || (ss.Rows > 0 && ss.Runs < 1) {
					t.Errorf("shard %d: bytes read %d, runs %d", i, ss.BytesRead, ss.Runs)
				}
				maps.Copy(union, rows)
			}
			if !reflect.DeepEqual(union, want) {
				t.Errorf("the shards' rows (%d series) differ from the unsharded build's (%d series)", len(union), len(want))
			}
		})
	}
}

// TestSplitRefusesBadPieces: a shard's build names the piece that is
// missing, given twice, of another split, or damaged.
func TestSplitRefusesBadPieces(t *testing.T) {
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	writeAttrLake(t, lake)
	fresh := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "split")
		splitAll(t, lake, dir, 2, 3, func(o *Options) { o.OnDuplicate = OnDuplicateLast })
		return dir
	}
	piece := func(dir string, j, m int, ext string) string {
		return filepath.Join(dir, shardDirName(0), pieceName(SplitPart{Index: j, Count: m})+ext)
	}
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, dir string)
		want  string
	}{
		{"missing", func(t *testing.T, dir string) { os.Remove(piece(dir, 1, 3, headExt)) }, "part-0001-of-0003.json of shard 0/2 is missing"},
		{"other split", func(t *testing.T, dir string) {
			splitAll(t, lake, filepath.Join(dir, "other"), 2, 2, func(o *Options) { o.OnDuplicate = OnDuplicateLast })
			os.Rename(piece(filepath.Join(dir, "other"), 0, 2, headExt), piece(dir, 0, 2, headExt))
		}, "pieces of two splits"},
		{"renamed", func(t *testing.T, dir string) {
			os.Rename(piece(dir, 2, 3, headExt), piece(dir, 7, 9, headExt))
		}, "not what its name says"},
		{"other shard count", func(t *testing.T, dir string) {
			splitAll(t, lake, filepath.Join(dir, "other"), 3, 3, func(o *Options) { o.OnDuplicate = OnDuplicateLast })
			os.Rename(piece(filepath.Join(dir, "other"), 1, 3, headExt), piece(dir, 1, 3, headExt))
		}, "holds shard 0/3, not 0/2"},
		{"truncated", func(t *testing.T, dir string) {
			p := piece(dir, 1, 3, runExt)
			fi, _ := os.Stat(p)
			os.Truncate(p, fi.Size()-3)
		}, "its manifest says"},
		{"damaged", func(t *testing.T, dir string) {
			p := piece(dir, 2, 3, runExt)
			b, _ := os.ReadFile(p)
			b[len(b)-2] ^= 0xff
			os.WriteFile(p, b, 0o644)
		}, "corrupt: damaged block"},
		{"run leaves out a column the schema lacks", func(t *testing.T, dir string) {
			editHead(t, piece(dir, 0, 3, headExt), func(h *pieceHead) { h.Runs[0].Omit = []int{0, 5} })
		}, "leaves out columns [0 5]: want increasing indexes below 2"},
		{"piece of version 1", func(t *testing.T, dir string) {
			editHead(t, piece(dir, 1, 3, headExt), func(h *pieceHead) { h.Version = 1 })
		}, "version 1, want \"servingsnap-split-piece\" version 2: split the table again"},
		{"run of another record size", func(t *testing.T, dir string) {
			editHead(t, piece(dir, 0, 3, headExt), func(h *pieceHead) { h.Runs[0].Omit = nil })
		}, "records of 21 bytes, the schema without the columns it leaves out makes 29"},
		{"meta of another split", func(t *testing.T, dir string) {
			splitAll(t, lake, filepath.Join(dir, "other"), 2, 3, nil)
			m := filepath.Join(dir, partsDir, pieceName(SplitPart{Index: 0, Count: 3})+metaExt)
			b, _ := os.ReadFile(filepath.Join(dir, "other", partsDir, pieceName(SplitPart{Index: 0, Count: 3})+metaExt))
			os.WriteFile(m, append(b, 0), 0o644)
		}, "written by another split"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fresh(t)
			tc.spoil(t, dir)
			out := filepath.Join(t.TempDir(), "DS")
			_, err := build(t, "", out, func(o *Options) {
				o.Shard = shard.Spec{Index: 0, Count: 2}
				o.OnDuplicate = OnDuplicateLast
				o.FromSplit = dir
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if ds, derr := dataset.Open(out); derr == nil {
				if _, cerr := ds.Current(); cerr == nil {
					t.Error("a snapshot was published")
				}
			}
		})
	}
}

// TestSplitReadsAboutTwiceTheLake: 4 parts and 4 shards read at most 2.2
// times the lake's bytes in all, by the builds' own counters, where 4
// shard builds from the lake read it 4 times; the 4 shards hold the
// unsharded build's rows, row for row.
func TestSplitReadsAboutTwiceTheLake(t *testing.T) {
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	gs, err := lakegen.Generate(context.Background(), lakegen.Options{Out: lake, Series: 3000, Seed: 9, FilesPerYear: 1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 4
	split := filepath.Join(root, "split")
	var read int64
	for _, s := range splitAll(t, lake, split, n, n, nil) {
		read += s.BytesRead
	}
	var plain int64
	union := map[string][]seriesRow{}
	for i := range n {
		spec := shard.Spec{Index: i, Count: n}
		out := filepath.Join(root, fmt.Sprint("S", i))
		ss, err := build(t, "", out, func(o *Options) { o.Shard = spec; o.FromSplit = split })
		if err != nil {
			t.Fatal(err)
		}
		read += ss.BytesRead
		_, rows, _ := readBack(t, out)
		maps.Copy(union, rows)
		ls, err := build(t, lake, filepath.Join(root, fmt.Sprint("L", i)), func(o *Options) { o.Shard = spec })
		if err != nil {
			t.Fatal(err)
		}
		plain += ls.BytesRead
	}
	if _, err := build(t, lake, filepath.Join(root, "WHOLE"), nil); err != nil {
		t.Fatal(err)
	}
	if _, want, _ := readBack(t, filepath.Join(root, "WHOLE")); !reflect.DeepEqual(union, want) {
		t.Errorf("the 4 shards' rows (%d series) differ from the unsharded build's (%d series)", len(union), len(want))
	}
	ratio := float64(read) / float64(gs.Bytes)
	t.Logf("lake %d bytes; split way %d (%.2fx), plain %d (%.2fx)", gs.Bytes, read, ratio, plain, float64(plain)/float64(gs.Bytes))
	if ratio > 2.2 {
		t.Errorf("the split way read %.2f times the lake, want at most 2.2", ratio)
	}
	if plain < n*gs.Bytes {
		t.Errorf("the plain shard builds read %d bytes, less than %d times the lake's %d", plain, n, gs.Bytes)
	}
}

// TestSplitRefusesInput: an Iceberg table (read through iceberg-go, no
// footers), a part out of range and no shard count are refused, naming
// what is wrong, and write nothing.
func TestSplitRefusesInput(t *testing.T) {
	root := t.TempDir()
	wh := filepath.Join(root, "wh")
	tables, err := testiceberg.Write(context.Background(), wh)
	if err != nil {
		t.Fatal(err)
	}
	lake := filepath.Join(root, "lake")
	writeAttrLake(t, lake)
	for _, tc := range []struct {
		name  string
		input string
		part  SplitPart
		count int
		want  string
	}{
		{"iceberg", testiceberg.TableDir(wh, tables[0].Name), SplitPart{Index: 0, Count: 2}, 2, "is an Iceberg table"},
		{"part out of range", lake, SplitPart{Index: 2, Count: 2}, 2, "the part must be from 0 to 1"},
		{"no shard count", lake, SplitPart{Index: 0, Count: 2}, 0, "give the number of shards"},
		{"object store", lake, SplitPart{Index: 0, Count: 2}, 2, "not an object store URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "split")
			out := dir
			if tc.name == "object store" {
				out = "s3://bucket/split"
			}
			_, err := Split(context.Background(), Options{Input: tc.input, Shard: shard.Spec{Count: tc.count}}, tc.part, out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the refused split wrote %s (%v)", dir, err)
			}
		})
	}
}

// TestSplitDuplicateAcrossParts: a duplicate key whose rows lie in two
// parts is refused by the shard's build from the split with the error of
// the same shard built from the lake (both rows named by file and row).
func TestSplitDuplicateAcrossParts(t *testing.T) {
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	writeAttrLake(t, lake)
	split := filepath.Join(root, "split")
	splitAll(t, lake, split, 2, 2, nil)
	spec := shard.Spec{Index: shard.Of("A", 2), Count: 2}
	_, lakeErr := build(t, lake, filepath.Join(root, "LAKE"), func(o *Options) { o.Shard = spec })
	_, splitErr := build(t, "", filepath.Join(root, "SPLIT"), func(o *Options) { o.Shard = spec; o.FromSplit = split })
	if lakeErr == nil || splitErr == nil || !strings.Contains(lakeErr.Error(), "part-3.parquet") || lakeErr.Error() != splitErr.Error() {
		t.Fatalf("from the lake: %v\nfrom the split: %v", lakeErr, splitErr)
	}
}

// editHead rewrites a piece's manifest through edit.
func editHead(t *testing.T, path string, edit func(*pieceHead)) {
	t.Helper()
	h, _, err := readPieceHead(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Runs) == 0 {
		t.Fatalf("%s holds no run", path)
	}
	edit(h)
	if err := writePieceHead(path, h); err != nil {
		t.Fatal(err)
	}
}
