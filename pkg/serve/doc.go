// Package serve is the Arrow Flight server of `snapbuild serve`: it maps the
// current snapshot of every dataset under a root directory and answers
// series queries from the index with zero-copy slices of the mapped data.
//
// Start-up opens each snapshot (pkg/snapshot: map the data file, parse its
// footer, load and checksum the index) and builds nothing per row or per
// series. A query is a JSON ticket (ticket.go, docs/FLIGHT.md): an index
// lookup or binary search selects the series, a binary search per series
// applies the period range, and the rows are streamed as slices of the
// mapped record batches, split to a byte budget and coalesced when small
// (stream.go).
//
// Each dataset's live snapshot sits behind a per-dataset state object with
// an atomic pointer (dataset.go). Every request acquires a reference and
// releases it when done; swap publishes a new snapshot and drops the old
// one, which is unmapped when its last reader is gone.
//
// Operations (server.go): optional bearer-token auth (auth.go), TLS, gRPC
// message limits, graceful shutdown, slog logs and Prometheus metrics with
// /healthz on a separate HTTP listener (metrics.go).
package serve
