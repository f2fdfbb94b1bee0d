package snapwrite

import (
	"fmt"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// Sink is where a snapshot writer (the builder's two paths, compaction)
// writes its sorted, series-aligned data batches: the hot data file, and
// with a tier policy (--hot-since, --hot-rows, --format vortex) the cold
// file too, through a Splitter that sends each series' cold prefix there.
// It names both files and says what the index must record of them
// (SetupIndex, ColdAt), so that every writer of a snapshot agrees.
type Sink struct {
	dw     *datafile.Writer
	cw     *coldfile.Writer // nil unless tiered
	sp     *Splitter
	policy coldfile.Policy

	hot  []datafile.Location // Drain's, reused
	cold []coldfile.Location
}

// NewSink creates data.arrow (and under a tiered policy cold.vortex) in
// dir for batches of the data schema.
func NewSink(dir string, schema *arrow.Schema, p coldfile.Policy) (*Sink, error) {
	dw, err := datafile.Create(filepath.Join(dir, "data.arrow"), schema)
	if err != nil {
		return nil, err
	}
	k := &Sink{dw: dw, policy: p}
	if !p.Tiered() {
		return k, nil
	}
	if k.cw, err = coldfile.Create(filepath.Join(dir, coldfile.FileName), schema, coldfile.Options{}); err != nil {
		dw.Abort()
		return nil, err
	}
	if k.sp, err = NewSplitter(dw, k.cw, p); err != nil {
		k.Abort()
		return nil, err
	}
	return k, nil
}

// Write writes the next batch (see datafile.Writer.Write).
func (k *Sink) Write(rec arrow.RecordBatch) error {
	if k.sp != nil {
		return k.sp.Write(rec)
	}
	return k.dw.Write(rec)
}

// Locations are, per series code, where its (hot) rows went.
func (k *Sink) Locations() []datafile.Location {
	if k.sp != nil {
		return k.sp.HotLocations()
	}
	return k.dw.Locations()
}

// Drain calls fn, in code order, with where the rows of each series
// written since the last Drain went (hot, and cold when tiered), and
// forgets them: a writer that indexes each batch's series as soon as the
// batch is written (compaction) holds no location per series of the
// snapshot. Locations and ColdAt count only the series not drained: use
// one way or the other.
func (k *Sink) Drain(fn func(hot datafile.Location, cold index.Cold) error) error {
	k.hot, k.cold = k.hot[:0], k.cold[:0]
	if k.sp == nil {
		k.hot = k.dw.TakeLocations(k.hot)
	} else {
		k.hot, k.cold = k.sp.TakeLocations(k.hot, k.cold)
		if len(k.hot) != len(k.cold) {
			return fmt.Errorf("snapshot writer: %d series with hot rows, %d with cold locations", len(k.hot), len(k.cold))
		}
	}
	for i, h := range k.hot {
		var c index.Cold
		if k.sp != nil {
			l := k.cold[i]
			c = index.Cold{Start: l.Start, Rows: l.Rows, FirstPeriod: l.FirstPeriod, LastPeriod: l.LastPeriod}
		}
		if err := fn(h, c); err != nil {
			return err
		}
	}
	return nil
}

// SetupIndex makes an index writer record what this sink wrote: a tiered sink
// needs a version-3 index.
func (k *Sink) SetupIndex(xw *index.Writer) {
	if k.sp != nil {
		xw.SetTiered(k.policy.AllCold)
	}
}

// ColdAt is where series i's cold rows went (zero when not tiered).
func (k *Sink) ColdAt(i int) index.Cold {
	if k.sp == nil {
		return index.Cold{}
	}
	l := k.sp.Locations()[i]
	return index.Cold{Start: l.Start, Rows: l.Rows, FirstPeriod: l.FirstPeriod, LastPeriod: l.LastPeriod}
}

// Close finishes the files and describes them for the manifest.
func (k *Sink) Close() ([]manifest.File, error) {
	dinfo, err := k.dw.Close()
	if err != nil {
		k.Abort()
		return nil, err
	}
	files := []manifest.File{{Path: "data.arrow", Role: manifest.RoleData, Tier: manifest.TierHot, Format: manifest.FormatArrowIPCFile,
		Size: dinfo.Size, Rows: dinfo.Rows, Batches: dinfo.Batches, Checksum: dinfo.Checksum}}
	if k.cw == nil {
		return files, nil
	}
	cinfo, err := k.cw.Close()
	if err != nil {
		return nil, err
	}
	return append(files, manifest.File{Path: coldfile.FileName, Role: manifest.RoleCold, Tier: manifest.TierCold, Format: manifest.FormatVortex,
		Size: cinfo.Size, Rows: cinfo.Rows, Batches: int(cinfo.Chunks), Checksum: cinfo.Checksum}), nil
}

// Abort removes what was written (safe after Close).
func (k *Sink) Abort() {
	k.dw.Abort()
	if k.cw != nil {
		k.cw.Abort()
	}
}
