package serve

import (
	"context"
	"crypto/tls"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/internal/testtls"
)

// Tokens of the TLS tests: one that may read and write, one that reads.
const (
	tlsWriter = "tls-writer-0123456789abcdef"
	tlsReader = "tls-reader-0123456789abcdef"
)

// tlsBearer sends a token on every call, and only over TLS: gRPC refuses to
// dial a plaintext connection with it (RequireTransportSecurity).
type tlsBearer string

func (b tlsBearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{authHeader: "Bearer " + string(b)}, nil
}

func (tlsBearer) RequireTransportSecurity() bool { return true }

// tlsServer serves liveRoot over TLS with the certificates of certs and
// the two tokens above.
func tlsServer(t *testing.T, certs *testtls.Certs) *Server {
	t.Helper()
	lines, err := ParseTokens("tokens", []byte(tlsWriter+" scopes=read,write\n"+tlsReader+" scopes=read\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := NewTokenSet(lines...)
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, Config{Root: liveRoot(t), Tokens: toks, TLSCert: certs.CertFile, TLSKey: certs.KeyFile})
}

// tlsOpts are the dial options of a client that trusts certs' authority
// and sends token.
func tlsOpts(certs *testtls.Certs, token string) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithTransportCredentials(credentials.NewTLS(certs.ClientConfig())),
		grpc.WithPerRPCCredentials(tlsBearer(token)),
	}
}

// TestTLSFlight: every kind of call over TLS with the authority trusted:
// ListFlights, GetFlightInfo, DoGet, a DoPut whose rows are then read back
// (plain and through Flight SQL), a Flight SQL statement and a prepared
// statement with a bound parameter, a Basic handshake; token scopes hold
// over TLS as over plaintext.
func TestTLSFlight(t *testing.T) {
	certs := testtls.New(t)
	srv := tlsServer(t, certs)
	if !strings.HasPrefix(srv.FlightURI(), "grpc+tls://") {
		t.Errorf("FlightURI %s, want grpc+tls://", srv.FlightURI())
	}
	addr := srv.FlightAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c, err := flight.NewClientWithMiddleware(addr, nil, nil, tlsOpts(certs, tlsWriter)...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// Plain Flight reads.
	list, err := c.ListFlights(ctx, &flight.Criteria{})
	if err != nil {
		t.Fatalf("ListFlights: %v", err)
	}
	var names []string
	for {
		info, err := list.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("ListFlights: %v", err)
		}
		names = append(names, info.FlightDescriptor.Path[0])
	}
	if !slices.Equal(names, []string{"LIVE"}) {
		t.Errorf("ListFlights over TLS: %v, want [LIVE]", names)
	}
	info, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"LIVE"}})
	if err != nil || info.TotalRecords != 5 {
		t.Fatalf("GetFlightInfo over TLS: %v records, %v", info.GetTotalRecords(), err)
	}
	all := map[string]any{"dataset": "LIVE", "prefix": ""}
	if got, want := rowsOfCtx(t, ctx, c, all), "A 2020-01-01 1\nA 2020-02-01 2\nA 2020-03-01 3\nB 2020-01-01 10\nB 2020-02-01 11"; got != want {
		t.Fatalf("DoGet over TLS:\n%s\nwant:\n%s", got, want)
	}

	// A DoPut, then the rows read back.
	rec := putRows{"series_id": {"A", "C"}, "period": {"2020-02", "2020-01"}, "value": {20.0, 100.0}, "units": {"u", "w"}}.record(t)
	defer rec.Release()
	acks, err := doPut(ctx, c, "LIVE", rec)
	if err != nil || len(acks) != 1 || acks[0]["rows"] != 2 {
		t.Fatalf("DoPut over TLS: %v %v", acks, err)
	}
	if got, want := rowsOfCtx(t, ctx, c, all), "A 2020-01-01 1\nA 2020-02-01 20\nA 2020-03-01 3\nB 2020-01-01 10\nB 2020-02-01 11\nC 2020-01-01 100"; got != want {
		t.Fatalf("after the DoPut over TLS:\n%s\nwant:\n%s", got, want)
	}

	// Flight SQL: a statement and a prepared statement read the new rows.
	sc, err := flightsql.NewClient(addr, nil, nil, tlsOpts(certs, tlsReader)...)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	sinfo, err := sc.Execute(ctx, "SELECT value FROM LIVE WHERE series_id = 'C'")
	if err != nil {
		t.Fatalf("Flight SQL statement over TLS: %v", err)
	}
	if r := sqlGet(t, ctx, sc, sinfo); len(r.values) != 1 || r.values[0] == nil || *r.values[0] != 100 {
		t.Errorf("Flight SQL statement over TLS: %v", r.cols)
	}
	prep, err := sc.Prepare(ctx, "SELECT value FROM LIVE WHERE series_id = ? AND period = '2020-02'")
	if err != nil {
		t.Fatalf("prepare over TLS: %v", err)
	}
	defer prep.Close(ctx)
	prep.SetParameters(stringParam(t, "A"))
	pinfo, err := prep.Execute(ctx)
	if err != nil {
		t.Fatalf("prepared statement over TLS: %v", err)
	}
	if r := sqlGet(t, ctx, sc, pinfo); len(r.values) != 1 || r.values[0] == nil || *r.values[0] != 20 {
		t.Errorf("prepared statement over TLS: %v", r.cols)
	}

	// Scopes hold: the read token may not write.
	if _, err := doPut(ctx, sc.Client, "LIVE", rec); status.Code(err) != codes.PermissionDenied {
		t.Errorf("DoPut with the read token over TLS: %v, want PermissionDenied", err)
	}

	// A Basic handshake over TLS returns the bearer header.
	hc, err := flight.NewClientWithMiddleware(addr, nil, nil, grpc.WithTransportCredentials(credentials.NewTLS(certs.ClientConfig())))
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	if _, err := hc.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"LIVE"}}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("no token over TLS: %v, want Unauthenticated", err)
	}
	hctx, err := hc.AuthenticateBasicToken(ctx, "anyone", tlsReader)
	if err != nil {
		t.Fatalf("Basic handshake over TLS: %v", err)
	}
	if info, err := hc.GetFlightInfo(hctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"LIVE"}}); err != nil || info.TotalRecords != 6 {
		t.Errorf("after a Basic handshake over TLS: %v records, %v", info.GetTotalRecords(), err)
	}
}

// stringParam is one row of one string column: a prepared statement's
// parameters.
func stringParam(t *testing.T, v string) arrow.RecordBatch {
	t.Helper()
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.Append(v)
	a := b.NewArray()
	defer a.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "p1", Type: arrow.BinaryTypes.String}}, nil), []arrow.Array{a}, 1)
	t.Cleanup(rec.Release)
	return rec
}

// rowsOfCtx is rowsOf with the caller's context (its credentials).
func rowsOfCtx(t *testing.T, ctx context.Context, c flight.Client, q map[string]any) string {
	t.Helper()
	r, err := get(ctx, c, ticket(q))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i, id := range r.ids {
		v := "null"
		if r.values[i] != nil {
			v = strconv.FormatFloat(*r.values[i], 'g', -1, 64)
		}
		out = append(out, id+" "+fmtDay(r.periods[i])+" "+v)
	}
	return strings.Join(out, "\n")
}

// TestTLSRefused: clients that do not trust the authority, name another
// host, offer only TLS 1.1 or speak plaintext get no answer: the call
// fails Unavailable with the handshake's cause, before any token is
// looked at.
func TestTLSRefused(t *testing.T) {
	certs := testtls.New(t)
	other := testtls.New(t)
	srv := tlsServer(t, certs)
	addr := srv.FlightAddr().String()
	for _, tc := range []struct {
		name  string
		creds credentials.TransportCredentials
		want  string // in the error
	}{
		{"another authority", credentials.NewTLS(other.ClientConfig()), "certificate signed by unknown authority"},
		{"the system's roots", credentials.NewTLS(&tls.Config{}), "certificate signed by unknown authority"},
		{"another host name", credentials.NewTLS(&tls.Config{RootCAs: certs.Pool(), ServerName: "example.com"}), "not example.com"},
		{"TLS 1.1", credentials.NewTLS(&tls.Config{RootCAs: certs.Pool(), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}), "remote error: tls: protocol version not supported"},
		{"plaintext", insecure.NewCredentials(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := flight.NewClientWithMiddleware(addr, nil, nil, grpc.WithTransportCredentials(tc.creds))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err = get(ctx, c, ticket(map[string]any{"dataset": "LIVE", "series": []string{"A"}}))
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DoGet: %v, want Unavailable containing %q", err, tc.want)
			}
		})
	}
	// The bearer credentials refuse to go over plaintext at all.
	if c, err := flight.NewClientWithMiddleware(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(tlsBearer(tlsReader))); err == nil {
		c.Close()
		t.Error("a token that requires transport security dialled plaintext")
	}
}

// TestTLSConfig: --tls-cert and --tls-key are both given or neither, and
// name a certificate and its key; anything else stops the server with
// what is wrong.
func TestTLSConfig(t *testing.T) {
	certs := testtls.New(t)
	other := testtls.New(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		cert, key string
		want      string
	}{
		{"certificate without key", certs.CertFile, "", "give both --tls-cert and --tls-key"},
		{"key without certificate", "", certs.KeyFile, "give both --tls-cert and --tls-key"},
		{"missing certificate", filepath.Join(dir, "none.pem"), certs.KeyFile, "serve: TLS: open " + filepath.Join(dir, "none.pem")},
		{"not PEM", garbage, certs.KeyFile, "serve: TLS: tls: failed to find any PEM data in certificate input"},
		{"another key", certs.CertFile, other.KeyFile, "serve: TLS: tls: private key does not match public key"},
	} {
		_, err := New(Config{Root: root(t), Addr: "127.0.0.1:0", TLSCert: tc.cert, TLSKey: tc.key})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
