package serve

// Authorization: what an authenticated token may do (docs/FLIGHT.md
// "Authentication"). authMiddleware puts the token's Grant in the call's
// context; flightMux checks the scope a call needs before anything runs
// (callScope, actionScope), and the handlers check each dataset a call
// names (permitDataset) before looking it up, so a dataset the token may
// not name is PermissionDenied whether it exists or not. Without tokens
// (no --token-file or --token-env) a context has no grant and everything
// is permitted.

import (
	"context"
	"strings"

	"google.golang.org/grpc/codes"
)

type grantKey struct{}

func withGrant(ctx context.Context, g Grant) context.Context {
	return context.WithValue(ctx, grantKey{}, &g)
}

// grantOf is the caller's grant; nil when the server takes no tokens.
func grantOf(ctx context.Context) *Grant {
	g, _ := ctx.Value(grantKey{}).(*Grant)
	return g
}

// adminActions are the DoActions that change what the server serves or
// holds: they need the admin scope. Every other action (status, the
// Flight SQL actions, which only touch the caller's own prepared
// statements) needs read.
var adminActions = map[string]bool{"reload": true, "compact": true, "discard": true}

// actionScope is the scope DoAction of type typ needs.
func actionScope(typ string) Scope {
	if adminActions[typ] {
		return ScopeAdmin
	}
	return ScopeRead
}

// needScope is nil when the caller's token carries scope s, else
// PermissionDenied naming what call needs which scope.
func needScope(ctx context.Context, s Scope, call string) error {
	g := grantOf(ctx)
	if g == nil || g.Has(s) {
		return nil
	}
	return errf(codes.PermissionDenied, "%s needs scope %q; this token has scopes=%s", call, s, g.Scopes)
}

// permitDataset is nil when the caller's token may name dataset name.
// For a token limited to some datasets it also answers NotFound for a
// permitted name the server does not serve, listing only the permitted
// datasets served, so that no answer tells such a token about others.
func (s *Service) permitDataset(ctx context.Context, name string) error {
	g := grantOf(ctx)
	if g == nil || g.Datasets == nil {
		return nil
	}
	if !g.Permits(name) {
		return errf(codes.PermissionDenied, "dataset %q: this token may not use it (datasets=%s)", truncate(name, 128), strings.Join(g.Datasets, ","))
	}
	if _, ok := s.datasets[name]; !ok && s.shards.sharded[name] == nil {
		vis := s.visible(ctx, s.names)
		return errf(codes.NotFound, "dataset %q not found (serving, of this token's datasets: %s)", name, strings.Join(vis, ", "))
	}
	return nil
}

// visible are the names of names the caller's token may name.
func (s *Service) visible(ctx context.Context, names []string) []string {
	g := grantOf(ctx)
	if g == nil || g.Datasets == nil {
		return names
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if g.Permits(n) {
			out = append(out, n)
		}
	}
	return out
}

// permitsAll is nil when the caller's token may name every dataset; an
// action over all datasets (reload or compact with an empty body) needs
// that, so a limited token names one.
func permitsAll(ctx context.Context, action string) error {
	g := grantOf(ctx)
	if g == nil || g.Datasets == nil {
		return nil
	}
	return errf(codes.PermissionDenied, "%s of every dataset: this token may use only datasets=%s; name one in the body", action, strings.Join(g.Datasets, ","))
}
