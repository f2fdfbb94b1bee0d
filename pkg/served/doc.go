// Package served holds the datasets a server serves, over their whole
// life: the View a request reads (a snapshot and the live delta merged
// over it, reference counted and swapped atomically), reloads of what
// CURRENT names, the live-write path (the write-ahead log and the delta),
// compaction and its schedule, and the damage found in served files.
//
// It knows no transport: pkg/serve adapts Flight requests to it and maps
// its errors (ErrClosed, ErrReadOnly, *FailingError, …) to status codes,
// as arrow-go keeps flightsql's domain Server apart from its gRPC wiring.
// Root opens every dataset under a root directory and runs the loops
// that keep them current (the reload poller, the compaction policy).
//
// Lock order within a dataset: swapMu (reloads and compactions), then the
// live writer's lock, then viewMu (pointer swaps). Readers take none.
package served

import "log/slog"

// discard is the logger of a caller that gives none.
var discard = slog.New(slog.DiscardHandler)
