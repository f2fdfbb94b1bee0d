package serve

import (
	"context"
	"encoding/base64"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

const (
	authHeader = "authorization"
	handshake  = "/arrow.flight.protocol.FlightService/Handshake"
)

// authMiddleware authenticates every call and puts the token's grant in
// its context, where the handlers check it (authz.go):
//
//   - `authorization: Bearer <token>` on any call, including Handshake;
//   - Handshake with `authorization: Basic base64(user:token)` (any user
//     name; the password is the token), as pyarrow's
//     authenticate_basic_token and Flight SQL drivers send it; the answer
//     carries `authorization: Bearer <token>` in its trailer, which those
//     clients then send on every call.
func authMiddleware(t *Tokens, m *Metrics) flight.ServerMiddleware {
	check := func(ctx context.Context, method string) (bearer string, g Grant, err error) {
		var h string
		if md, ok := metadata.FromIncomingContext(ctx); ok {
			if v := md.Get(authHeader); len(v) > 0 {
				h = v[0]
			}
		}
		scheme, cred, _ := strings.Cut(strings.TrimSpace(h), " ")
		cred = strings.TrimSpace(cred)
		switch {
		case strings.EqualFold(scheme, "Bearer") && cred != "":
			if g, ok := t.Lookup(cred); ok {
				return cred, g, nil
			}
		case strings.EqualFold(scheme, "Basic") && cred != "" && method == handshake:
			raw, err := base64.StdEncoding.DecodeString(cred)
			if err != nil {
				raw, err = base64.RawStdEncoding.DecodeString(cred)
			}
			if err == nil {
				if _, pass, ok := strings.Cut(string(raw), ":"); ok {
					if g, ok := t.Lookup(pass); ok {
						return pass, g, nil
					}
				}
			}
		case h == "":
			if m != nil {
				m.authFailed.Inc()
			}
			return "", Grant{}, status.Error(codes.Unauthenticated, "missing token: send `authorization: Bearer <token>` (or a Basic handshake whose password is the token)")
		}
		if m != nil {
			m.authFailed.Inc()
		}
		return "", Grant{}, status.Error(codes.Unauthenticated, "invalid token")
	}
	return flight.ServerMiddleware{
		Unary: func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if isHealthMethod(info.FullMethod) {
				return handler(ctx, req) // open, as /healthz (health.go)
			}
			_, g, err := check(ctx, info.FullMethod)
			if err != nil {
				return nil, err
			}
			return handler(withGrant(ctx, g), req)
		},
		Stream: func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			if isHealthMethod(info.FullMethod) {
				return handler(srv, ss)
			}
			tok, g, err := check(ss.Context(), info.FullMethod)
			if err != nil {
				return err
			}
			if info.FullMethod == handshake {
				ss.SetTrailer(metadata.Pairs(authHeader, "Bearer "+tok))
			}
			return handler(srv, &grantStream{ServerStream: ss, ctx: withGrant(ss.Context(), g)})
		},
	}
}

// grantStream is a stream whose context carries the caller's grant.
type grantStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (g *grantStream) Context() context.Context { return g.ctx }
