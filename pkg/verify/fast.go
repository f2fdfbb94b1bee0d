package verify

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/snapshot"
	"github.com/energyscope/servingsnap/pkg/verify/arrowcheck"
	"github.com/energyscope/servingsnap/pkg/verify/manifestcheck"
)

// checkDatasetDir makes sure there is a dataset to verify at all. A missing
// or unreadable directory, or one that holds none of a dataset's entries,
// is a usage error, not a corrupt dataset.
func (v *verifier) checkDatasetDir() error {
	if err := v.ds.CheckExists(); err != nil {
		return fmt.Errorf("%w: %v", ErrCannotVerify, err)
	}
	ents, err := os.ReadDir(v.ds.Dir)
	if err != nil {
		return fmt.Errorf("%w: dataset directory: %v", ErrCannotVerify, err)
	}
	for _, e := range ents {
		switch e.Name() {
		case dataset.CurrentFile, dataset.ManifestsDir, dataset.SnapshotsDir:
			return nil
		}
	}
	return fmt.Errorf("%w: %s is not a dataset directory (no %s, %s/ or %s/)", ErrCannotVerify,
		v.ds.Dir, dataset.CurrentFile, dataset.ManifestsDir, dataset.SnapshotsDir)
}

// selectSnapshot returns the id to verify: Options.SnapshotID, or the one
// CURRENT names. A CURRENT that is missing, malformed or dangling is a
// finding (the dataset cannot be served) and yields id 0.
func (v *verifier) selectSnapshot() (uint64, error) {
	if id := v.opt.SnapshotID; id != 0 {
		if _, err := os.Lstat(v.ds.Path(dataset.ManifestPath(id))); errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("%w: %v", ErrCannotVerify, v.ds.CheckVintage(id)) // names the vintages present
		}
		return id, nil
	}
	v.ran()
	b, err := os.ReadFile(v.ds.Path(dataset.CurrentFile))
	if err != nil {
		msg := fmt.Sprintf("cannot read CURRENT: %v", err)
		if errors.Is(err, fs.ErrNotExist) {
			msg = "CURRENT is missing: no snapshot is published"
		}
		v.add(CheckCurrent, dataset.CurrentFile, "", "%s", msg)
		if ids, _ := v.ds.IDs(); len(ids) > 0 {
			v.note(fmt.Sprintf("newest manifest present is %s (verify it with --snapshot %d)", dataset.ManifestPath(ids[len(ids)-1]), ids[len(ids)-1]))
		}
		return 0, nil
	}
	id, err := dataset.ParseCurrent(b)
	if err != nil {
		v.add(CheckCurrent, dataset.CurrentFile, "", "%v (content %s)", err, quoteShort(b))
		return 0, nil
	}
	if _, err := os.Stat(v.ds.Path(dataset.ManifestPath(id))); err != nil {
		v.add(CheckCurrent, dataset.CurrentFile, "", "CURRENT names %s, which cannot be read: %v", dataset.ManifestPath(id), unwrapPath(err))
		return 0, nil
	}
	// HISTORY is advisory (a crash between the flip and its log line is
	// legitimate), so a disagreement is a note, not a finding.
	if flips, err := v.ds.Flips(); err == nil && len(flips) > 0 && flips[len(flips)-1].To != id {
		v.note(fmt.Sprintf("%s's last flip is to snapshot %d, CURRENT names %d (CURRENT is the truth)", dataset.HistoryFile, flips[len(flips)-1].To, id))
	}
	return id, nil
}

// loadManifest reads and parses manifest id. It returns false when there
// is no usable file list (nothing further can be checked).
func (v *verifier) loadManifest(id uint64) bool {
	rel := dataset.ManifestPath(id)
	v.ran()
	b, err := os.ReadFile(v.ds.Path(rel))
	if err != nil {
		v.add(CheckManifest, rel, "", "cannot read the manifest: %v", unwrapPath(err))
		return false
	}
	m, err := manifest.Parse(b)
	if err != nil {
		v.add(CheckManifest, rel, "", "%v", err)
		return false
	}
	if m.SnapshotID != id {
		v.add(CheckManifest, rel, "snapshot_id", "manifest holds snapshot_id %d, its file name says %d", m.SnapshotID, id)
	}
	if m.Dataset != v.ds.Name {
		v.add(CheckManifest, rel, "dataset", "manifest is for dataset %q, the directory is %q", m.Dataset, v.ds.Name)
	}
	v.m, v.raw = m, b
	v.r.Rows, v.r.Series = m.Stats.Rows, m.Stats.Series
	if d, ok := m.FileByRole(manifest.RoleData); ok {
		v.r.Batches = d.Batches
	}
	if c, ok := m.FileByRole(manifest.RoleCold); ok {
		v.r.ColdRows, v.r.ColdChunks = c.Rows, c.Batches
	}
	return true
}

// checkManifestRules enforces what docs/FORMAT.md §2 says about a manifest
// beyond manifest.Validate (see package manifestcheck).
func (v *verifier) checkManifestRules() {
	v.ran()
	for _, p := range manifestcheck.Problems(v.raw, v.m) {
		if !v.add(CheckManifestRules, v.r.Manifest, p.Location, "%s", p.Message) {
			return
		}
	}
}

// checkFiles compares every file's size and checksum with the manifest.
// It reports whether all of them match.
func (v *verifier) checkFiles() bool {
	intact := true
	for _, f := range v.m.Files {
		v.ran()
		p := v.ds.Path(f.Path)
		st, err := os.Stat(p)
		if err != nil {
			intact = false
			msg := fmt.Sprintf("cannot stat: %v", unwrapPath(err))
			if errors.Is(err, fs.ErrNotExist) {
				msg = "file is missing"
			}
			v.add(CheckFiles, f.Path, "", "%s", msg)
			continue
		}
		if !st.Mode().IsRegular() {
			intact = false
			v.add(CheckFiles, f.Path, "", "not a regular file (%s)", st.Mode().Type())
			continue
		}
		if st.Size() != f.Size {
			intact = false
			v.add(CheckFiles, f.Path, "", "file is %d bytes, manifest says %d", st.Size(), f.Size)
			continue
		}
		v.ran()
		sum, n, err := fileutil.ChecksumFile(p)
		v.r.BytesChecksummed += n
		if err != nil {
			intact = false
			v.add(CheckChecksum, f.Path, "", "cannot read: %v", unwrapPath(err))
			continue
		}
		if sum != f.Checksum {
			intact = false
			v.add(CheckChecksum, f.Path, "", "checksum %s, manifest says %s", sum, f.Checksum)
		}
	}
	return intact
}

// open opens the snapshot the way a server reloading it would, with
// VerifyData, and turns a refusal into a finding unless an earlier finding
// already explains it (a file whose size or checksum differs, a manifest
// for another id or dataset).
func (v *verifier) open(intact bool) {
	v.ran()
	s, err := openRecovered(v.ds.Dir, v.r.SnapshotID)
	if err != nil {
		if !v.anySince(0, CheckFiles, CheckChecksum, CheckManifest) {
			v.add(CheckOpen, v.fileInError(err), "", "snapshot.Open refuses the snapshot: %v", err)
		}
		return
	}
	v.snap = s
	v.r.Opens = true
	if !intact {
		// Open checks every file the manifest lists; it cannot accept what
		// checkFiles rejected. Say so rather than carry on quietly.
		v.note("snapshot.Open accepted a snapshot whose files failed the size or checksum check")
	}
}

// openRecovered is snapshot.OpenID with VerifyData, with a panic turned
// into an error: snapshot.Open does not recover from every malformed
// footer (arrow-go's footer accessors can panic), and a verifier must
// report a bad file, not crash on it.
func openRecovered(dir string, id uint64) (s *snapshot.Snapshot, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, corrupt.Errorf("opening panicked: %v", r)
		}
	}()
	return snapshot.OpenID(dir, id, snapshot.Options{VerifyData: true})
}

// fileInError names the snapshot file an Open error is about (the
// *corrupt.FileError snapshot.Open locates it with), or the manifest when
// the error is not about one of the files it lists.
func (v *verifier) fileInError(err error) string {
	if p, ok := corrupt.File(err); ok {
		for _, f := range v.m.Files {
			if f.Path == p {
				return f.Path
			}
		}
	}
	return v.r.Manifest
}

// checkStructure proves every buffer of the index batch and the data
// batches safe to read (package arrowcheck) before any check reads a
// value: arrow-go trusts them, and one bad string offset with resealed
// checksums made snapverify panic. It reports whether all are.
func (v *verifier) checkStructure() bool {
	s := v.snap
	xf, _ := v.m.FileByRole(manifest.RoleIndex)
	df, _ := v.m.FileByRole(manifest.RoleData)
	ok := true
	v.ran()
	v.at = xf.Path
	if err := arrowcheck.Record(s.Index().Record()); err != nil {
		v.add(CheckStructure, xf.Path, "batch 0", "%v", err)
		ok = false
	}
	v.ran()
	v.at = df.Path
	for i := 0; i < s.NumBatches(); i++ {
		if err := arrowcheck.Record(s.Batch(i)); err != nil {
			ok = false
			if !v.add(CheckStructure, df.Path, fmt.Sprintf("batch %d", i), "%v", err) {
				break
			}
		}
	}
	v.at = ""
	return ok
}

// arrowMagic opens and closes every Arrow IPC file (docs/FORMAT.md §3).
var arrowMagic = []byte("ARROW1\x00\x00")

// checkOpened makes the cheap checks snapshot.Open does not: the leading
// Arrow magic (arrow-go only checks the trailing one), attribute columns
// against schema.attributes, string attribute encodings, and the period
// statistics against the index.
func (v *verifier) checkOpened() {
	s := v.snap
	xf0, _ := v.m.FileByRole(manifest.RoleIndex)
	v.at = xf0.Path
	x := s.Index()
	v.r.Series = int64(x.Len())
	v.r.Batches = s.NumBatches()
	v.r.Rows = 0
	for i := 0; i < s.NumBatches(); i++ {
		v.r.Rows += s.Batch(i).NumRows()
	}
	if c := s.Cold(); c != nil {
		v.r.ColdRows = c.NumRows()
		v.r.Rows += c.NumRows()
	}

	for _, f := range v.m.Files {
		if f.Format != manifest.FormatArrowIPCFile {
			continue // the portable copy: checkPortable reads it
		}
		v.ran()
		head := make([]byte, len(arrowMagic))
		fh, err := os.Open(v.ds.Path(f.Path))
		if err == nil {
			_, err = io.ReadFull(fh, head)
			fh.Close()
		}
		if err != nil {
			v.add(CheckArrow, f.Path, "offset 0", "cannot read the file header: %v", unwrapPath(err))
		} else if !bytes.Equal(head, arrowMagic) {
			v.add(CheckArrow, f.Path, "offset 0", "file starts with %q, want the Arrow IPC magic %q", head, arrowMagic)
		}
	}

	v.ran()
	xf, _ := v.m.FileByRole(manifest.RoleIndex)
	df, _ := v.m.FileByRole(manifest.RoleData)
	fields, _ := x.Attributes()
	own := index.OwnNames()
	var names []string
	for _, f := range fields {
		names = append(names, f.Name)
		if slices.Contains(own, f.Name) {
			v.add(CheckSchema, xf.Path, "column "+f.Name, "attribute %q has the name of one of the index's own columns: a reader going by name finds two", f.Name)
		}
		if f.Type.ID() == arrow.DICTIONARY {
			dt := f.Type.(*arrow.DictionaryType)
			switch dt.IndexType.ID() {
			case arrow.INT8, arrow.INT16, arrow.INT32:
			default:
				v.add(CheckSchema, xf.Path, "column "+f.Name, "dictionary index type %s, want int8, int16 or int32", dt.IndexType)
			}
			if dt.ValueType.ID() != arrow.STRING {
				v.add(CheckSchema, xf.Path, "column "+f.Name, "dictionary of %s; only utf8 attributes may be dictionary-encoded", dt.ValueType)
			}
		}
	}
	if !slices.Equal(names, v.m.Schema.Attributes) {
		v.add(CheckSchema, xf.Path, fmt.Sprintf("columns %d…", index.NumFixed), "attribute columns %q, manifest schema.attributes says %q", names, v.m.Schema.Attributes)
	}
	attr := map[string]bool{}
	for _, a := range v.m.Schema.Attributes {
		attr[a] = true
	}
	seen := map[string]bool{}
	for i, f := range s.Schema().Fields() {
		if seen[f.Name] {
			v.add(CheckSchema, df.Path, fmt.Sprintf("column %d", i), "column %q appears twice", f.Name)
		}
		seen[f.Name] = true
		if i >= datafile.NumFixed && attr[f.Name] {
			v.add(CheckSchema, df.Path, fmt.Sprintf("column %d", i), "column %q is both a data column and an attribute", f.Name)
		}
		if i >= datafile.NumFixed && f.Name == index.ColSeriesID {
			v.add(CheckSchema, df.Path, fmt.Sprintf("column %d", i), "the data file holds series ids; they belong in the index")
		}
	}
	if f := s.Schema().Field(datafile.ColumnSeriesCode); f.Nullable || s.Schema().Field(datafile.ColumnPeriod).Nullable {
		v.add(CheckSchema, df.Path, "columns 0-1", "%s and %s must not be nullable", datafile.ColSeriesCode, datafile.ColPeriod)
	}

	v.ran()
	if x.Len() == 0 {
		if v.m.Stats.FirstPeriod != "" || v.m.Stats.LastPeriod != "" {
			v.add(CheckStats, v.r.Manifest, "stats", "period bounds %q..%q in a snapshot without series", v.m.Stats.FirstPeriod, v.m.Stats.LastPeriod)
		}
		return
	}
	// Ids are strictly increasing (the deep check proves it), so an
	// empty id can only be the first: a series no ticket can name.
	if x.SeriesID(0) == "" {
		v.add(CheckIndex, xf.Path, "series 0", "empty series_id: every series needs a non-empty id")
	}
	lo, hi := x.Entry(0).FirstPeriod, x.Entry(0).LastPeriod
	outside := -1
	for i := 0; i < x.Len(); i++ {
		e := x.Entry(i)
		lo, hi = min(lo, e.FirstPeriod), max(hi, e.LastPeriod)
		if outside < 0 && (!period.InRange(e.FirstPeriod) || !period.InRange(e.LastPeriod)) {
			outside = i
		}
	}
	if outside >= 0 {
		e := x.Entry(outside)
		v.add(CheckIndex, xf.Path, fmt.Sprintf("series %d %q", outside, x.SeriesID(outside)), "periods %s..%s outside 0001-01-01..9999-12-31, the range every file holds", period.Format(e.FirstPeriod), period.Format(e.LastPeriod))
	}
	if got := period.Format(lo); got != v.m.Stats.FirstPeriod {
		v.add(CheckStats, v.r.Manifest, "stats.first_period", "first_period %q, the index's smallest first_period is %s", v.m.Stats.FirstPeriod, got)
	}
	if got := period.Format(hi); got != v.m.Stats.LastPeriod {
		v.add(CheckStats, v.r.Manifest, "stats.last_period", "last_period %q, the index's largest last_period is %s", v.m.Stats.LastPeriod, got)
	}
}

// quoteShort quotes at most 64 bytes of b for a message.
func quoteShort(b []byte) string {
	if len(b) > 64 {
		return fmt.Sprintf("%q…", b[:64])
	}
	return fmt.Sprintf("%q", b)
}

// unwrapPath drops the absolute path a *PathError carries: findings name
// files relative to the dataset directory.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
