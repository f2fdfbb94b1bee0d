package compact

import (
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/sidecar"
)

// sink is where a compaction writes its merged, series-aligned batches:
// the hot data file, and for a tiered base the cold file too, through a
// coldfile.Splitter that applies the base's tier policy again (so rows
// that aged out of the hot window move to cold.vortex, and a delta's
// revisions of old rows land there). It is the builder's dataSink
// (pkg/sortwrite) for the compactor, which may not import the builder;
// both are thin over coldfile.Splitter, where the split itself lives.
type sink struct {
	dw     *datafile.Writer
	cw     *coldfile.Writer // nil unless tiered
	sp     *coldfile.Splitter
	policy coldfile.Policy
}

func newSink(dir string, schema *arrow.Schema, p coldfile.Policy) (*sink, error) {
	dw, err := datafile.Create(filepath.Join(dir, "data.arrow"), schema)
	if err != nil {
		return nil, err
	}
	k := &sink{dw: dw, policy: p}
	if !p.Tiered() {
		return k, nil
	}
	if k.cw, err = coldfile.Create(filepath.Join(dir, coldfile.FileName), schema, coldfile.Options{}); err != nil {
		dw.Abort()
		return nil, err
	}
	if k.sp, err = coldfile.NewSplitter(dw, k.cw, p); err != nil {
		k.Abort()
		return nil, err
	}
	return k, nil
}

// Write writes the next batch (see datafile.Writer.Write).
func (k *sink) Write(rec arrow.RecordBatch) error {
	if k.sp != nil {
		return k.sp.Write(rec)
	}
	return k.dw.Write(rec)
}

// Locations are, per series code, where its hot rows went.
func (k *sink) Locations() []datafile.Location {
	if k.sp != nil {
		return k.sp.HotLocations()
	}
	return k.dw.Locations()
}

// setup makes the index writer record what this sink wrote: a tiered
// sink needs a version-3 index.
func (k *sink) setup(xw *sidecar.Writer) {
	if k.sp != nil {
		xw.SetTiered(k.policy.AllCold)
	}
}

// cold is where series i's cold rows went (zero when not tiered).
func (k *sink) cold(i int) sidecar.Cold {
	if k.sp == nil {
		return sidecar.Cold{}
	}
	l := k.sp.Locations()[i]
	return sidecar.Cold{Start: l.Start, Rows: l.Rows, FirstPeriod: l.FirstPeriod, LastPeriod: l.LastPeriod}
}

// Close finishes the data files and describes them for the manifest.
func (k *sink) Close() ([]manifest.File, error) {
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
		Size: cinfo.Size, Rows: cinfo.Rows, Batches: cinfo.Chunks, Checksum: cinfo.Checksum}), nil
}

// Abort removes what was written (safe after Close).
func (k *sink) Abort() {
	k.dw.Abort()
	if k.cw != nil {
		k.cw.Abort()
	}
}
