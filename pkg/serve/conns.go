package serve

// Client connections as the state they own sees them.
//
// gRPC multiplexes a client's calls over one connection (an HTTP/2
// transport) and tells a stats.Handler when one begins (TagConn) and ends
// (ConnEnd). connStats gives each connection a clientConn, reachable from
// every call's context, and calls onEnd when the connection goes, so state
// a client made (its prepared statements) goes with it.

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc/stats"
)

// clientConn is one client connection, from its TagConn to its ConnEnd.
type clientConn struct {
	id     uint64
	remote string
	// ended is set by ConnEnd before onEnd runs: state must not be added
	// for the connection afterwards (see preparedStore.add).
	ended atomic.Bool
}

type connKey struct{}

// connOf is the connection a call came on; nil outside a gRPC server
// (in-process use), which then counts as one connection.
func connOf(ctx context.Context) *clientConn {
	c, _ := ctx.Value(connKey{}).(*clientConn)
	return c
}

// connStats is the gRPC stats.Handler that tracks connections.
type connStats struct {
	next  atomic.Uint64
	onEnd func(*clientConn)
}

func (h *connStats) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	c := &clientConn{id: h.next.Add(1)}
	if info != nil && info.RemoteAddr != nil {
		c.remote = info.RemoteAddr.String()
	}
	return context.WithValue(ctx, connKey{}, c)
}

func (h *connStats) HandleConn(ctx context.Context, s stats.ConnStats) {
	if _, ok := s.(*stats.ConnEnd); !ok {
		return
	}
	if c := connOf(ctx); c != nil {
		c.ended.Store(true)
		if h.onEnd != nil {
			h.onEnd(c)
		}
	}
}

func (h *connStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (h *connStats) HandleRPC(context.Context, stats.RPCStats) {}
