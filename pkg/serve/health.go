package serve

// The gRPC health service on the Flight port (docs/FLIGHT.md "Replicas").
//
// Every server answers the standard grpc.health.v1.Health protocol, the one
// Kubernetes' gRPC probes, grpc_health_probe and load balancers speak, and
// the one other servingsnap servers use to check the locations of their
// cluster file (locations.go): service "" is the server, and each served
// dataset's name is a service of its own, SERVING while the server holds
// it. All turn NOT_SERVING when the server starts shutting down. The
// health methods need no token (like /healthz): they say only whether a
// dataset name is served here.

import (
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// healthMethodPrefix is the gRPC method prefix of the health service.
const healthMethodPrefix = "/grpc.health.v1.Health/"

// isHealthMethod reports whether a full gRPC method name is a health call.
func isHealthMethod(fullMethod string) bool { return strings.HasPrefix(fullMethod, healthMethodPrefix) }

// newHealth registers the health service on reg, SERVING for the server
// and for every dataset named.
func newHealth(reg grpc.ServiceRegistrar, datasets []string) *health.Server {
	h := health.NewServer()
	h.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	for _, n := range datasets {
		h.SetServingStatus(n, healthpb.HealthCheckResponse_SERVING)
	}
	healthpb.RegisterHealthServer(reg, h)
	return h
}
