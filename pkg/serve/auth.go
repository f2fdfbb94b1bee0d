package serve

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"os"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Tokens is a set of accepted bearer tokens, compared in constant time:
// each candidate is hashed (SHA-256, so lengths leak nothing) and compared
// with every token's hash without stopping at the first match.
type Tokens struct {
	sums [][sha256.Size]byte
}

// MinTokenLength is the shortest token ReadTokenFile accepts.
const MinTokenLength = 16

// NewTokens makes a token set; empty tokens are refused.
func NewTokens(tokens ...string) (*Tokens, error) {
	t := &Tokens{}
	for i, tok := range tokens {
		if tok == "" {
			return nil, fmt.Errorf("token %d is empty", i+1)
		}
		t.sums = append(t.sums, sha256.Sum256([]byte(tok)))
	}
	if len(t.sums) == 0 {
		return nil, fmt.Errorf("no tokens")
	}
	return t, nil
}

// ReadTokenFile reads tokens, one per line; blank lines and lines starting
// with # are ignored, surrounding whitespace is trimmed. Tokens shorter than
// MinTokenLength are refused (use e.g. `openssl rand -hex 32`).
func ReadTokenFile(path string) (*Tokens, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var toks []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if len(s) < MinTokenLength {
			return nil, fmt.Errorf("%s:%d: token is %d characters, want at least %d", path, line, len(s), MinTokenLength)
		}
		if strings.ContainsAny(s, " \t") {
			return nil, fmt.Errorf("%s:%d: token contains whitespace", path, line)
		}
		toks = append(toks, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("%s: no tokens (one per line; # starts a comment)", path)
	}
	return NewTokens(toks...)
}

// Valid reports whether tok is one of the tokens, in time independent of
// which token (if any) matches and of their lengths.
func (t *Tokens) Valid(tok string) bool {
	sum := sha256.Sum256([]byte(tok))
	ok := 0
	for i := range t.sums {
		ok |= subtle.ConstantTimeCompare(sum[:], t.sums[i][:])
	}
	return ok == 1
}

const (
	authHeader = "authorization"
	handshake  = "/arrow.flight.protocol.FlightService/Handshake"
)

// authMiddleware enforces the tokens on every call:
//
//   - `authorization: Bearer <token>` on any call, including Handshake;
//   - Handshake with `authorization: Basic base64(user:token)` (any user
//     name; the password is the token), as pyarrow's
//     authenticate_basic_token and Flight SQL drivers send it; the answer
//     carries `authorization: Bearer <token>` in its trailer, which those
//     clients then send on every call.
func authMiddleware(t *Tokens, m *Metrics) flight.ServerMiddleware {
	check := func(ctx context.Context, method string) (bearer string, err error) {
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
			if t.Valid(cred) {
				return cred, nil
			}
		case strings.EqualFold(scheme, "Basic") && cred != "" && method == handshake:
			raw, err := base64.StdEncoding.DecodeString(cred)
			if err != nil {
				raw, err = base64.RawStdEncoding.DecodeString(cred)
			}
			if err == nil {
				if _, pass, ok := strings.Cut(string(raw), ":"); ok && t.Valid(pass) {
					return pass, nil
				}
			}
		case h == "":
			if m != nil {
				m.authFailed.Inc()
			}
			return "", status.Error(codes.Unauthenticated, "missing token: send `authorization: Bearer <token>` (or a Basic handshake whose password is the token)")
		}
		if m != nil {
			m.authFailed.Inc()
		}
		return "", status.Error(codes.Unauthenticated, "invalid token")
	}
	return flight.ServerMiddleware{
		Unary: func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if _, err := check(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return handler(ctx, req)
		},
		Stream: func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			tok, err := check(ss.Context(), info.FullMethod)
			if err != nil {
				return err
			}
			if info.FullMethod == handshake {
				ss.SetTrailer(metadata.Pairs(authHeader, "Bearer "+tok))
			}
			return handler(srv, ss)
		},
	}
}
