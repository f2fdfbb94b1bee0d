// Package livedelta holds a dataset's live writes between two snapshots (the
// design's "delta"; named apart from Delta Lake, which pkg/lake/deltalog reads): the
// rows DoPut accepted after the snapshot being served was built, in memory,
// sorted, ready to be merged on read and folded into the next snapshot.
//
// A write becomes an immutable Run: its rows sorted by (series id, period),
// duplicates within the write resolved to the later row. Runs are ordered
// by their sequence number (the WAL position of their newest write), and a
// newer run shadows an older one, and the base snapshot, for the same
// (series id, period): generation precedence, as Lance's MemWAL and
// InfluxDB 3 do. A State is an immutable list of runs; applying a write
// returns a new State (copy on write), so a reader holding a State is never
// disturbed by writers and never blocks them. To keep reads cheap, adjacent
// runs of similar size are merged as writes arrive (a size-tiered merge:
// O(log n) runs, each row copied O(log n) times).
//
// Freezing marks the runs a compaction folds into the next snapshot; new
// writes go after them and are never merged into them.
package livedelta
