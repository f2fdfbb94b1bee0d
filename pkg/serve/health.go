package serve

// The gRPC health service on the Flight port (docs/FLIGHT.md "Replicas").
//
// Every server answers the standard grpc.health.v1.Health protocol, the one
// Kubernetes' gRPC probes, grpc_health_probe and load balancers speak, and
// the one other servingsnap servers use to check the locations of their
// cluster file (locations.go): service "" is the server, and each served
// dataset's name is a service of its own, SERVING while the server holds
// it and it is not failing (its current snapshot damaged: what it serves,
// if anything, is not what another replica serves). All turn NOT_SERVING
// when the server starts shutting down. The
// health methods need no token (like /healthz): they say only whether a
// dataset name is served here.

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// healthMethodPrefix is the gRPC method prefix of the health service.
const healthMethodPrefix = "/grpc.health.v1.Health/"

// isHealthMethod reports whether a full gRPC method name is a health call.
func isHealthMethod(fullMethod string) bool { return strings.HasPrefix(fullMethod, healthMethodPrefix) }

// healthService is grpc-go's health server, whose Check also says
// NOT_SERVING for a dataset that is failing (Watch reports the stored
// states only).
type healthService struct {
	*health.Server
	svc *Service
}

func (h healthService) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	res, err := h.Server.Check(ctx, req)
	if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return res, err
	}
	if d, ok := h.svc.datasets[req.GetService()]; ok && d.Failing() {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, nil
	}
	return res, nil
}

// newHealth registers the health service on reg, SERVING for the server
// and for every dataset of svc.
func newHealth(reg grpc.ServiceRegistrar, svc *Service) *health.Server {
	h := health.NewServer()
	h.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	for _, n := range svc.Datasets() {
		h.SetServingStatus(n, healthpb.HealthCheckResponse_SERVING)
	}
	healthpb.RegisterHealthServer(reg, healthService{Server: h, svc: svc})
	return h
}
