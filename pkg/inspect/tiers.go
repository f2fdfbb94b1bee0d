package inspect

import (
	"fmt"
	"io"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// Tiers is where a snapshot's rows live (docs/FORMAT.md §9): the mapped
// hot data file and, in a tiered snapshot, the cold Vortex file, with the
// policy that split them. It comes from the manifest alone, so a snapshot
// whose files do not open still says it.
type Tiers struct {
	// Tiered: the snapshot has a cold file (manifest format_version 3).
	Tiered bool `json:"tiered"`
	// Format is where the rows are: "arrow" (the hot file holds rows,
	// perhaps with a cold tail) or "vortex" (every row cold: build.format).
	Format string `json:"format"`
	// The policy (build.hot_since, build.hot_rows): "" and 0 when unset.
	HotSince string   `json:"hot_since"`
	HotRows  int64    `json:"hot_rows"`
	Hot      TierSize `json:"hot"`
	Cold     TierSize `json:"cold"` // zeros when not tiered
}

// TierSize is one tier's share: rows, bytes on disk, and the units it is
// read in (record batches of the hot file, chunks of the cold file).
type TierSize struct {
	Path    string `json:"path"` // "" for no such file
	Rows    int64  `json:"rows"`
	Bytes   int64  `json:"bytes"`
	Batches int    `json:"batches"` // the hot file's record batches (0 for the cold tier)
	Chunks  int    `json:"chunks"`  // the cold file's chunks (0 for the hot tier)
}

// tiersOf reads the tiers from a manifest.
func tiersOf(m *manifest.Manifest) Tiers {
	t := Tiers{Format: "arrow", HotSince: m.Build.HotSince, HotRows: m.Build.HotRows}
	if m.Build.DataFormat == coldfile.FormatVortex {
		t.Format = coldfile.FormatVortex
	}
	if d, ok := m.FileByRole(manifest.RoleData); ok {
		t.Hot = TierSize{Path: d.Path, Rows: d.Rows, Bytes: d.Size, Batches: d.Batches}
	}
	if c, ok := m.FileByRole(manifest.RoleCold); ok {
		t.Tiered = true
		t.Cold = TierSize{Path: c.Path, Rows: c.Rows, Bytes: c.Size, Chunks: c.Batches}
	}
	return t
}

// policy says the split in words.
func (t Tiers) policy() string {
	switch {
	case !t.Tiered:
		return "all hot, no cold file"
	case t.Format == coldfile.FormatVortex:
		return "every row cold: --format vortex"
	}
	s := ""
	if t.HotSince != "" {
		s = "hot since " + t.HotSince
	}
	if t.HotRows > 0 {
		if s != "" {
			s += " or "
		}
		s += fmt.Sprintf("the last %s rows of each series hot", Commas(t.HotRows))
	}
	return s + "; the last row of every series is hot"
}

// writeText renders the tiers section of the text summary.
func (t Tiers) writeText(w io.Writer) {
	if !t.Tiered {
		fmt.Fprintf(w, "\ntiers: %s\n", t.policy()) // the files table says the rest
		return
	}
	fmt.Fprintf(w, "\ntiers (%s)\n", t.policy())
	total := t.Hot.Rows + t.Cold.Rows
	bytes := t.Hot.Bytes + t.Cold.Bytes
	share := func(part, whole int64) string {
		if whole == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
	}
	perRow := func(b, rows int64) string {
		if rows == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", float64(b)/float64(rows))
	}
	tt := newTable("tier", "format", "rows", "of rows", "size", "of bytes", "bytes/row", "read in", "path").alignRight(2, 3, 4, 5, 6, 7)
	tt.add("hot", manifest.FormatArrowIPCFile, Commas(t.Hot.Rows), share(t.Hot.Rows, total), HumanBytes(t.Hot.Bytes), share(t.Hot.Bytes, bytes), perRow(t.Hot.Bytes, t.Hot.Rows), units(t.Hot.Batches, "batch", "batches"), orDash(t.Hot.Path))
	if t.Tiered {
		tt.add("cold", manifest.FormatVortex, Commas(t.Cold.Rows), share(t.Cold.Rows, total), HumanBytes(t.Cold.Bytes), share(t.Cold.Bytes, bytes), perRow(t.Cold.Bytes, t.Cold.Rows), units(t.Cold.Chunks, "chunk", "chunks"), orDash(t.Cold.Path))
	}
	tt.write(w, "  ")
}

func units(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return Commas(int64(n)) + " " + many
}

// ColdFile locates the cold file of vintage id of the dataset at dir
// (CURRENT's when id is 0): its path on disk and the manifest that lists
// it, so that snapinspect vortex can describe a snapshot's cold.vortex by
// naming the dataset. A snapshot without one is a snapshot.ErrNotFound error that
// says so.
func ColdFile(dir string, id uint64) (string, *manifest.Manifest, error) {
	ds, err := Dataset(dir)
	if err != nil {
		return "", nil, err
	}
	if id, err = Resolve(ds, id); err != nil {
		return "", nil, err
	}
	m, err := ds.Load(id)
	if err != nil {
		return "", nil, err
	}
	cf, ok := m.FileByRole(manifest.RoleCold)
	if !ok {
		return "", m, notFound("snapshot %d of %s has no cold file: it is not tiered (every row is in %s; snapbuild build --hot-since, --hot-rows or --format vortex write one)", id, ds.Name, tiersOf(m).Hot.Path)
	}
	return ds.Path(cf.Path), m, nil
}
