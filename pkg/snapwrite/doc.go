// Package snapwrite is what every writer of a snapshot (the builder's
// in-memory and external paths in pkg/sortwrite, a compaction in
// pkg/compact) writes through, so that they agree on the files and on the
// manifest that describes them:
//
//   - Sink takes the sorted, series-aligned data batches and writes
//     data.arrow, and under a tier policy cold.vortex too, through a
//     Splitter that sends each series' cold prefix to the cold file
//     (pkg/coldfile) and its hot rows to the data file (pkg/datafile); it
//     says what the index must record of them;
//   - Pipe writes those batches one batch behind, on a goroutine of its
//     own, and stops at the first failed write;
//   - Snapshot.Manifest assembles the manifest of what was written, and
//     PlaceFiles names its files by their place in the published snapshot;
//     ColumnsOf is how a manifest describes an Arrow schema, which the read
//     side (pkg/snapshot) checks the files against.
//
// The formats themselves (their layout and readers) stay in their own
// packages; the dataset directory's staging and publishing in pkg/dataset.
package snapwrite
