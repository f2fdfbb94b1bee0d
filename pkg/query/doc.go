// Package query is the read layer every transport plans through: Flight
// tickets and Flight SQL statements (pkg/serve, the latter parsed by
// pkg/sqlq), snapinspect, export, verify and compaction. It knows nothing
// of gRPC or of any wire format; it resolves a Request (which series, which
// periods, which columns) against a Reader into a Plan, and streams the
// plan's rows as Arrow record batches through a callback.
//
// A Reader is one consistent, immutable view of a dataset: series lookup
// in id order, the rows of a series in a period range as pieces of
// record batches, latest values and bounds, and per-series attributes.
// An open snapshot is one (FromSnapshot: a piece is a slice of a mapped
// batch or, for a tiered snapshot, of a series' decoded cold rows); a
// Composite, a base snapshot with the live delta's runs merged over it
// (the newest generation winning), is another, in the manner of Pebble's
// readState and Prometheus's BlockReader/Querier. The dispatch between
// tiers and the delta therefore lives behind Reader, never in a transport.
//
// Errors are domain sentinels (ErrNotFound, ErrInvalid, ErrLimit,
// ErrStale, and corrupt.ErrCorrupt from below) tested with errors.Is;
// only a transport maps them to its own codes.
package query
