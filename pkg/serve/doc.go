// Package serve is the Arrow Flight server of `snapserve` (and `snapbuild
// serve`): it adapts Flight and Flight SQL calls to the datasets of
// pkg/served and maps their errors to gRPC status codes. Nothing below it
// knows a transport.
//
// A query is a JSON ticket (ticket.go, docs/FLIGHT.md) or a restricted SQL
// statement (flightsql.go, over pkg/sqlq): it is planned through pkg/query
// over the dataset's current view (served.View: the mapped snapshot with
// the live delta merged on read) and streamed as slices of the mapped
// record batches, split to a byte budget and coalesced when small. Every
// request acquires the view and releases it when its stream ends; a reload
// or compaction swaps views without waiting for it. A ticket may name a
// retained vintage instead, read as it was published.
//
// DoPut (live.go; its stages timed in putstages.go) checks a batch's Arrow
// data as it came off the wire (putvalidate.go), bounds the bytes all
// writes hold, and hands it to the dataset's write path; DoAction
// (service.go) runs status, reload, compact and discard.
//
// Operations (server.go): optional bearer-token auth (auth.go), TLS, gRPC
// message limits, flow control for slow clients (flow.go), graceful
// shutdown, slog logs, and Prometheus metrics (metrics.go) served with
// /healthz and /readyz on a separate HTTP listener, and the gRPC health
// service on the Flight port (health.go); sharded datasets answer
// GetFlightInfo, of tickets and of Flight SQL statements, with one
// endpoint per shard (shards.go, shards_sql.go) listing the shard's
// locations that the periodic health checks find live (locations.go).
package serve
