package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/energyscope/servingsnap/internal/datadriven"
	"github.com/energyscope/servingsnap/internal/testsnap"
)

// TestTokenScripts: the token-line format, golden (testdata/tokens.txt).
func TestTokenScripts(t *testing.T) {
	datadriven.RunFile(t, filepath.Join("testdata", "tokens.txt"), func(d *datadriven.Directive) string {
		if d.Cmd != "parse" {
			t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
		}
		_, env := d.Arg("env")
		source := "tokens"
		if env {
			source = "$TOKENS"
		}
		lines, err := ParseTokens(source, []byte(d.Input), env)
		if err != nil {
			return "error: " + err.Error()
		}
		if _, err := NewTokenSet(lines...); err != nil {
			return "error: " + err.Error()
		}
		var out []string
		for _, l := range lines {
			out = append(out, fmt.Sprintf("%s:%d: %s %s", l.Source, l.Line, l.Token, l.Grant))
		}
		return strings.Join(out, "\n")
	})
}

// TestParseTokensLineEnds: CRLF and a last line without a newline.
func TestParseTokensLineEnds(t *testing.T) {
	for _, tc := range []struct {
		text string
		env  bool
		want []string
	}{
		{"a-0123456789abcdef scopes=read\r\nb-0123456789abcdef\r\n", false, []string{"a-0123456789abcdef scopes=read", "b-0123456789abcdef scopes=read,write,admin"}},
		{"a-0123456789abcdef datasets=PET", false, []string{"a-0123456789abcdef scopes=read,write,admin datasets=PET"}},
		{"a-0123456789abcdef scopes=read\r\n;b-0123456789abcdef", true, []string{"a-0123456789abcdef scopes=read", "b-0123456789abcdef scopes=read,write,admin"}},
	} {
		lines, err := ParseTokens("t", []byte(tc.text), tc.env)
		if err != nil {
			t.Errorf("%q: %v", tc.text, err)
			continue
		}
		var got []string
		for _, l := range lines {
			got = append(got, l.Token+" "+l.Grant.String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.text, got, tc.want)
		}
	}
}

// TestParseTokensLongLine: a line past the limit is an error naming it.
func TestParseTokensLongLine(t *testing.T) {
	text := "a-0123456789abcdef\n" + strings.Repeat("x", maxTokenLine+1) + "\n"
	_, err := ParseTokens("t", []byte(text), false)
	if err == nil || !strings.HasPrefix(err.Error(), "t:2: ") {
		t.Errorf("a line of %d bytes: %v", maxTokenLine+1, err)
	}
}

// TestGrantPermits: a dataset limit covers the shards of a sharded
// dataset it names, and nothing else.
func TestGrantPermits(t *testing.T) {
	g := Grant{Scopes: ScopeRead, Datasets: []string{"GAS", "PET"}}
	for name, want := range map[string]bool{
		"PET": true, "GAS": true, "PET.shard-0000": true, "PET.shard-0123": true,
		"PETX": false, "PE": false, "OIL": false, "OIL.shard-0000": false, "PET.shard-": false,
		"PET.shard-12": false, "PET.shard-00x1": false, ".shard-0000": false, "": false,
	} {
		if got := g.Permits(name); got != want {
			t.Errorf("Permits(%q) = %v, want %v", name, got, want)
		}
	}
	if !(Grant{Scopes: ScopeRead}).Permits("ANY") {
		t.Error("a grant without a dataset limit refuses a dataset")
	}
	one := Grant{Scopes: ScopeRead, Datasets: []string{"PET.shard-0001"}}
	if !one.Permits("PET.shard-0001") || one.Permits("PET.shard-0000") || one.Permits("PET") {
		t.Error("a grant of one shard permits more or less than that shard")
	}
}

// TestTokenLookup: every token finds its own grant.
func TestTokenLookup(t *testing.T) {
	lines, err := ParseTokens("t", []byte("r-0123456789abcdef scopes=read\nw-0123456789abcdef scopes=write datasets=PET\nbare-0123456789abcdef\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := NewTokenSet(lines...)
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]string{
		"r-0123456789abcdef": "scopes=read", "w-0123456789abcdef": "scopes=write datasets=PET",
		"bare-0123456789abcdef": "scopes=read,write,admin",
	} {
		g, ok := ts.Lookup(tok)
		if !ok || g.String() != want {
			t.Errorf("Lookup(%s) = %v %v, want %s", tok, g, ok, want)
		}
	}
	for _, tok := range []string{"", "r-0123456789abcde", "r-0123456789abcdef ", "x"} {
		if _, ok := ts.Lookup(tok); ok {
			t.Errorf("Lookup(%q) found a grant", tok)
		}
	}
	// the same token from a file and the environment
	env, _ := ParseTokens("$T", []byte("w-0123456789abcdef"), true)
	if _, err := NewTokenSet(append(lines, env...)...); err == nil || !strings.Contains(err.Error(), "$T:1: the same token as t:2") {
		t.Errorf("a token in both sources: %v", err)
	}
}

// TestEnvTokenLines: --token-env reads a variable, lines separated by ';'.
func TestEnvTokenLines(t *testing.T) {
	t.Setenv("SERVINGSNAP_TEST_TOKENS", "r-0123456789abcdef scopes=read; w-0123456789abcdef scopes=read,write datasets=PET\n# note\n")
	lines, err := EnvTokenLines("SERVINGSNAP_TEST_TOKENS")
	if err != nil || len(lines) != 2 || lines[1].Grant.String() != "scopes=read,write datasets=PET" || lines[1].Source != "$SERVINGSNAP_TEST_TOKENS" {
		t.Fatalf("%+v %v", lines, err)
	}
	if _, err := EnvTokenLines("SERVINGSNAP_TEST_TOKENS_UNSET"); err == nil || !strings.Contains(err.Error(), "SERVINGSNAP_TEST_TOKENS_UNSET is not set") {
		t.Errorf("unset variable: %v", err)
	}
	t.Setenv("SERVINGSNAP_TEST_TOKENS", "r-0123456789abcdef scopes=red")
	if _, err := EnvTokenLines("SERVINGSNAP_TEST_TOKENS"); err == nil || !strings.Contains(err.Error(), `$SERVINGSNAP_TEST_TOKENS:1: unknown scope "red"`) {
		t.Errorf("bad scope: %v", err)
	}
}

// FuzzParseTokens: any text is a set of token lines or an error, never a
// panic; what parses writes back as lines that parse to the same grants.
func FuzzParseTokens(f *testing.F) {
	for _, s := range []string{
		"0123456789abcdef0123\n",
		"r-0123456789abcdef scopes=read\nw-0123456789abcdef scopes=read,write datasets=PET,GAS\n# c\n\n",
		"a-0123456789abcdef scopes=read;b-0123456789abcdef datasets=PET.shard-0001",
		"x scopes=", "scopes=read tok-0123456789abcdef", "t-0123456789abcdef datasets=,", "\r\n;;\x00\xff",
		"dup-0123456789abcdef\ndup-0123456789abcdef scopes=read",
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, text []byte, semicolons bool) {
		lines, err := ParseTokens("f", text, semicolons)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f:") {
				t.Fatalf("error does not name the source: %v", err)
			}
			return
		}
		if len(lines) == 0 {
			t.Fatal("no lines and no error")
		}
		ts, err := NewTokenSet(lines...)
		if err != nil {
			t.Fatalf("parsed lines make no set: %v", err)
		}
		var again strings.Builder
		for _, l := range lines {
			if len(l.Token) < MinTokenLength || strings.ContainsAny(l.Token, " \t\n") || (semicolons && strings.Contains(l.Token, ";")) {
				t.Fatalf("token %q accepted", l.Token)
			}
			if l.Grant.Scopes == 0 || l.Grant.Scopes&^ScopeAll != 0 || (l.Grant.Datasets != nil && len(l.Grant.Datasets) == 0) {
				t.Fatalf("grant %+v accepted", l.Grant)
			}
			if g, ok := ts.Lookup(l.Token); !ok || g.String() != l.Grant.String() {
				t.Fatalf("Lookup(%q) = %v %v, want %v", l.Token, g, ok, l.Grant)
			}
			fmt.Fprintf(&again, "%s %s\n", l.Token, l.Grant)
		}
		back, err := ParseTokens("g", []byte(again.String()), false)
		if err != nil || len(back) != len(lines) {
			t.Fatalf("written back %q: %d lines, %v", again.String(), len(back), err)
		}
		for i := range back {
			if back[i].Token != lines[i].Token || back[i].Grant.String() != lines[i].Grant.String() {
				t.Fatalf("line %d: %v, written back %v", i, lines[i], back[i])
			}
		}
	})
}

// The tokens of the scope tests: one per kind of grant.
const (
	tokRead   = "read-token-0123456789"
	tokWrite  = "write-token-0123456789"
	tokAdmin  = "admin-token-0123456789"
	tokOther  = "other-token-0123456789" // every scope, datasets OTHER and GHOST (not served)
	tokBare   = "bare-token-0123456789"
	scopeFile = tokRead + " scopes=read\n" + tokWrite + " scopes=write\n" + tokAdmin + " scopes=admin\n" +
		tokOther + " scopes=read,write,admin datasets=OTHER,GHOST\n" + tokBare + "\n"
)

// scopeRoot builds datasets LIVE and OTHER, writable, from liveRoot's lake:
// A (3 monthly rows), B (2), attribute units.
func scopeRoot(t *testing.T) string {
	t.Helper()
	root := liveRoot(t)
	testsnap.Build(t, filepath.Join(filepath.Dir(root), "lake"), filepath.Join(root, "OTHER"), nil)
	return root
}

// scopeServer serves scopeRoot with the scope tokens.
func scopeServer(t *testing.T) (*Server, string) {
	t.Helper()
	lines, err := ParseTokens("tokens", []byte(scopeFile), false)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := NewTokenSet(lines...)
	if err != nil {
		t.Fatal(err)
	}
	r := scopeRoot(t)
	return startServer(t, Config{Root: r, Tokens: toks, HTTPAddr: "127.0.0.1:0"}), r
}

func bearer(ctx context.Context, tok string) context.Context {
	if tok == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

// drain reads a stream of any kind to its end.
func drain[T any](recv func() (T, error)) error {
	for {
		if _, err := recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// scopeCall is one call of the matrix, on dataset LIVE where it names one.
type scopeCall struct {
	name string
	need Scope // 0: a valid token is enough
	// dataset: the call names LIVE, which tokOther may not use; all: it
	// acts on every dataset, which only tokens without a limit may.
	dataset, all bool
	ok           codes.Code // the answer when permitted
	run          func(ctx context.Context, tok string) error
}

// TestScopes runs every RPC and every action, plain Flight and Flight
// SQL, with each kind of token and without one, and checks the status
// code and, for a refusal, that the message names the missing scope or
// the dataset.
func TestScopes(t *testing.T) {
	srv, _ := scopeServer(t)
	c := dial(t, srv)
	sc := dialSQL(t, srv.FlightAddr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	full := bearer(ctx, tokBare)

	// Flight SQL state made with the full token, used by the others.
	info, err := sc.Execute(full, "SELECT * FROM LIVE")
	if err != nil {
		t.Fatal(err)
	}
	stmtTicket := info.Endpoint[0].Ticket
	prepared, err := sc.Prepare(full, "SELECT value FROM LIVE WHERE series_id = ?")
	if err != nil {
		t.Fatal(err)
	}
	defer prepared.Close(full)
	param := func() arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{{Name: "p1", Type: arrow.BinaryTypes.String}}, nil))
		defer b.Release()
		b.Field(0).(*array.StringBuilder).Append("A")
		return b.NewRecordBatch()
	}
	action := func(typ, body string) func(ctx context.Context, tok string) error {
		return func(ctx context.Context, tok string) error {
			s, err := c.DoAction(bearer(ctx, tok), &flight.Action{Type: typ, Body: []byte(body)})
			if err != nil {
				return err
			}
			return drain(s.Recv)
		}
	}
	getTicket := func(tk []byte) func(ctx context.Context, tok string) error {
		return func(ctx context.Context, tok string) error {
			_, err := get(bearer(ctx, tok), c, tk)
			return err
		}
	}
	path := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"LIVE"}}
	liveTicket := []byte(`{"dataset":"LIVE","series":["A"]}`)

	calls := []scopeCall{
		{name: "Handshake", run: func(ctx context.Context, tok string) error {
			s, err := c.Handshake(bearer(ctx, tok))
			if err != nil {
				return err
			}
			s.CloseSend()
			return drain(s.Recv)
		}},
		{name: "ListActions", run: func(ctx context.Context, tok string) error {
			s, err := c.ListActions(bearer(ctx, tok), &flight.Empty{})
			if err != nil {
				return err
			}
			return drain(s.Recv)
		}},
		{name: "ListFlights", need: ScopeRead, run: func(ctx context.Context, tok string) error {
			_, err := listNames(bearer(ctx, tok), c, "")
			return err
		}},
		{name: "ListFlights vintages", need: ScopeRead, run: func(ctx context.Context, tok string) error {
			_, err := listNames(bearer(ctx, tok), c, `{"vintages": true}`)
			return err
		}},
		{name: "GetFlightInfo path", need: ScopeRead, dataset: true, run: func(ctx context.Context, tok string) error {
			_, err := c.GetFlightInfo(bearer(ctx, tok), path)
			return err
		}},
		{name: "GetFlightInfo ticket", need: ScopeRead, dataset: true, run: func(ctx context.Context, tok string) error {
			_, err := c.GetFlightInfo(bearer(ctx, tok), &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: liveTicket})
			return err
		}},
		{name: "GetSchema path", need: ScopeRead, dataset: true, run: func(ctx context.Context, tok string) error {
			_, err := c.GetSchema(bearer(ctx, tok), path)
			return err
		}},
		{name: "GetSchema ticket", need: ScopeRead, dataset: true, run: func(ctx context.Context, tok string) error {
			_, err := c.GetSchema(bearer(ctx, tok), &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: liveTicket})
			return err
		}},
		{name: "PollFlightInfo", ok: codes.Unimplemented, run: func(ctx context.Context, tok string) error {
			_, err := c.PollFlightInfo(bearer(ctx, tok), path)
			return err
		}},
		{name: "DoGet", need: ScopeRead, dataset: true, run: getTicket(liveTicket)},
		{name: "DoPut", need: ScopeWrite, dataset: true, run: func(ctx context.Context, tok string) error {
			rec := putRows{"series_id": {"A"}, "period": {"2020-04"}, "value": {4.0}, "units": {"u"}}.record(t)
			defer rec.Release()
			return putOne(bearer(ctx, tok), c, "LIVE", rec)
		}},
		{name: "DoExchange", ok: codes.Unimplemented, run: func(ctx context.Context, tok string) error {
			s, err := c.DoExchange(bearer(ctx, tok))
			if err != nil {
				return err
			}
			s.CloseSend()
			return drain(s.Recv)
		}},
		{name: "DoAction status", need: ScopeRead, run: action("status", "")},
		{name: "DoAction reload", need: ScopeAdmin, dataset: true, run: action("reload", "LIVE")},
		{name: "DoAction reload all", need: ScopeAdmin, all: true, run: action("reload", "")},
		{name: "DoAction compact", need: ScopeAdmin, dataset: true, run: action("compact", "LIVE")},
		{name: "DoAction compact all", need: ScopeAdmin, all: true, run: action("compact", "")},
		{name: "DoAction discard", need: ScopeAdmin, dataset: true, run: action("discard", "LIVE\nscope test")},
		{name: "DoAction unknown", need: ScopeRead, ok: codes.Unimplemented, run: action("nope", "")},

		{name: "SQL statement", need: ScopeRead, dataset: true, run: func(ctx context.Context, tok string) error {
			_, err := sc.Execute(bearer(ctx, tok), "SELECT * FROM LIVE WHERE series_id = 'A'")
			return err
		}},
		{name: "SQL statement schema", need: ScopeRead, dataset: true, run: func(ctx context.Context, tok string) error {
			_, err := sc.GetExecuteSchema(bearer(ctx, tok), "SELECT value FROM LIVE")
			return err
		}},
		{name: "SQL statement DoGet", need: ScopeRead, dataset: true, run: getTicket(stmtTicket.Ticket)},
		{name: "SQL prepare", need: ScopeRead, dataset: true, run: func(ctx context.Context, tok string) error {
			ps, err := sc.Prepare(bearer(ctx, tok), "SELECT * FROM LIVE")
			if err == nil {
				ps.Close(full)
			}
			return err
		}},
		{name: "SQL prepared bind and execute", need: ScopeRead, dataset: true, run: func(ctx context.Context, tok string) error {
			rec := param()
			defer rec.Release()
			prepared.SetParameters(rec)
			info, err := prepared.Execute(bearer(ctx, tok))
			if err != nil {
				return err
			}
			_, err = get(bearer(ctx, tok), c, info.Endpoint[0].Ticket.Ticket)
			return err
		}},
		{name: "SQL prepared schema", need: ScopeRead, dataset: true, run: func(ctx context.Context, tok string) error {
			_, err := prepared.GetSchema(bearer(ctx, tok))
			return err
		}},
		{name: "SQL prepared close", need: ScopeRead, run: func(ctx context.Context, tok string) error {
			ps, err := sc.Prepare(full, "SELECT * FROM LIVE")
			if err != nil {
				t.Fatal(err)
			}
			if err := ps.Close(bearer(ctx, tok)); err != nil {
				ps.Close(full)
				return err
			}
			return nil
		}},
		{name: "SQL GetTables", need: ScopeRead, run: func(ctx context.Context, tok string) error {
			_, err := sqlTables(bearer(ctx, tok), sc, true)
			return err
		}},
		{name: "SQL GetCatalogs", need: ScopeRead, run: func(ctx context.Context, tok string) error {
			return sqlMeta(bearer(ctx, tok), sc, sc.GetCatalogs)
		}},
		{name: "SQL GetDBSchemas", need: ScopeRead, run: func(ctx context.Context, tok string) error {
			return sqlMeta(bearer(ctx, tok), sc, func(ctx context.Context, _ ...grpc.CallOption) (*flight.FlightInfo, error) {
				return sc.GetDBSchemas(ctx, &flightsql.GetDBSchemasOpts{})
			})
		}},
		{name: "SQL GetTableTypes", need: ScopeRead, run: func(ctx context.Context, tok string) error {
			return sqlMeta(bearer(ctx, tok), sc, sc.GetTableTypes)
		}},
		{name: "SQL GetSqlInfo", need: ScopeRead, run: func(ctx context.Context, tok string) error {
			return sqlMeta(bearer(ctx, tok), sc, func(ctx context.Context, _ ...grpc.CallOption) (*flight.FlightInfo, error) {
				return sc.GetSqlInfo(ctx, []flightsql.SqlInfo{flightsql.SqlInfoFlightSqlServerName})
			})
		}},
		{name: "SQL update", need: ScopeWrite, ok: codes.Unimplemented, run: func(ctx context.Context, tok string) error {
			return executeUpdate(bearer(ctx, tok), sc, "DELETE FROM LIVE")
		}},
		{name: "SQL begin transaction", need: ScopeRead, ok: codes.Unimplemented, run: func(ctx context.Context, tok string) error {
			_, err := sc.BeginTransaction(bearer(ctx, tok))
			return err
		}},
	}
	tokens := []struct {
		name, tok string
		grant     *Grant // nil: no token
	}{
		{"read", tokRead, &Grant{Scopes: ScopeRead}},
		{"write", tokWrite, &Grant{Scopes: ScopeWrite}},
		{"admin", tokAdmin, &Grant{Scopes: ScopeAdmin}},
		{"wrong dataset", tokOther, &Grant{Scopes: ScopeAll, Datasets: []string{"GHOST", "OTHER"}}},
		{"bare", tokBare, &Grant{Scopes: ScopeAll}},
		{"no token", "", nil},
	}
	for _, call := range calls {
		for _, tk := range tokens {
			want, wantMsg := call.ok, ""
			switch g := tk.grant; {
			case g == nil:
				want = codes.Unauthenticated
			case !g.Has(call.need):
				want, wantMsg = codes.PermissionDenied, fmt.Sprintf("needs scope %q", call.need)
			case call.dataset && !g.Permits("LIVE"):
				want, wantMsg = codes.PermissionDenied, `dataset "LIVE": this token may not use it`
			case call.all && g.Datasets != nil:
				want, wantMsg = codes.PermissionDenied, "this token may use only datasets=GHOST,OTHER"
			}
			err := call.run(ctx, tk.tok)
			if got := status.Code(err); got != want {
				t.Errorf("%s, token %s: %v, want %v", call.name, tk.name, err, want)
			} else if wantMsg != "" && !strings.Contains(status.Convert(err).Message(), wantMsg) {
				t.Errorf("%s, token %s: %q does not say %q", call.name, tk.name, status.Convert(err).Message(), wantMsg)
			}
		}
	}
}

// TestScopesHideDatasets: a token limited to some datasets sees only
// them in every listing, and a dataset it may not use is refused the
// same way whether it exists or not.
func TestScopesHideDatasets(t *testing.T) {
	srv, _ := scopeServer(t)
	c := dial(t, srv)
	sc := dialSQL(t, srv.FlightAddr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tc := range []struct {
		tok  string
		want []string
	}{{tokRead, []string{"LIVE", "OTHER"}}, {tokBare, []string{"LIVE", "OTHER"}}, {tokOther, []string{"OTHER"}}} {
		bctx := bearer(ctx, tc.tok)
		if got, err := listNames(bctx, c, ""); err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ListFlights with %s: %v %v, want %v", tc.tok, got, err, tc.want)
		}
		if got, err := listNames(bctx, c, `{"vintages": true}`); err != nil || !slices.Equal(slices.Compact(got), tc.want) {
			t.Errorf("ListFlights vintages with %s: %v %v, want %v", tc.tok, got, err, tc.want)
		}
		for _, schemas := range []bool{false, true} {
			if got, err := sqlTables(bctx, sc, schemas); err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("GetTables (schemas %v) with %s: %v %v, want %v", schemas, tc.tok, got, err, tc.want)
			}
		}
		st := statusWith(t, bctx, c)
		var got []string
		var mapped int64
		for _, d := range st.Datasets {
			got = append(got, d.Name)
			mapped += d.MappedBytes
		}
		if !slices.Equal(got, tc.want) || mapped != st.MappedBytes {
			t.Errorf("status with %s: datasets %v (mapped %d, total %d), want %v", tc.tok, got, mapped, st.MappedBytes, tc.want)
		}
	}

	// LIVE (served) and NOPE (not): the same refusal for a token limited
	// to OTHER and GHOST; GHOST (permitted, not served) is NotFound
	// listing only what the token may see.
	other := bearer(ctx, tokOther)
	msgs := map[string]string{}
	for _, name := range []string{"LIVE", "NOPE"} {
		_, err := get(other, c, []byte(`{"dataset":"`+name+`","prefix":""}`))
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("DoGet %s with a token for OTHER: %v", name, err)
		}
		msgs[name] = strings.ReplaceAll(requestIDRe.ReplaceAllString(status.Convert(err).Message(), ""), name, "X")
		_, err = sc.Execute(other, "SELECT * FROM "+name)
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("SQL on %s with a token for OTHER: %v", name, err)
		}
	}
	if msgs["LIVE"] != msgs["NOPE"] {
		t.Errorf("a served and an unknown dataset are refused differently: %q, %q", msgs["LIVE"], msgs["NOPE"])
	}
	_, err := get(other, c, []byte(`{"dataset":"GHOST","prefix":""}`))
	if m := status.Convert(err).Message(); status.Code(err) != codes.NotFound || strings.Contains(m, "LIVE") || !strings.Contains(m, "OTHER") {
		t.Errorf("DoGet of GHOST with a token for it: %v", err)
	}
	// and the token works on its dataset
	if r, err := get(other, c, []byte(`{"dataset":"OTHER","series":["A"]}`)); err != nil || len(r.ids) != 3 {
		t.Errorf("DoGet of OTHER with a token for it: %v", err)
	}
}

// putOne sends one batch in a DoPut and reads the answer to its end: the
// status a refused stream ends with, even when the server refused it
// before the batch was written.
func putOne(ctx context.Context, c flight.Client, dataset string, rec arrow.RecordBatch) error {
	stream, err := c.DoPut(ctx)
	if err != nil {
		return err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(rec.Schema()))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{dataset}})
	if err := w.Write(rec); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	w.Close()
	stream.CloseSend()
	return drain(stream.Recv)
}

// executeUpdate is flightsql.Client.ExecuteUpdate, except that it reads
// the stream's status when its Send finds the call already ended
// (io.EOF): the library returns that bare EOF, which a server refusing
// the call before it read the stream (no token) causes whenever the
// refusal arrives before the Send.
func executeUpdate(ctx context.Context, sc *flightsql.Client, query string) error {
	cmd, err := anypb.New(&pb.CommandStatementUpdate{Query: query})
	if err != nil {
		return err
	}
	body, err := proto.Marshal(cmd)
	if err != nil {
		return err
	}
	stream, err := sc.Client.DoPut(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&flight.FlightData{FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: body}}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	stream.CloseSend()
	return drain(stream.Recv)
}

// listNames is the dataset of each FlightInfo ListFlights sends.
func listNames(ctx context.Context, c flight.Client, expr string) ([]string, error) {
	s, err := c.ListFlights(ctx, &flight.Criteria{Expression: []byte(expr)})
	if err != nil {
		return nil, err
	}
	var names []string
	for {
		info, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return names, err
		}
		var md struct{ Dataset string }
		json.Unmarshal(info.AppMetadata, &md)
		names = append(names, md.Dataset)
	}
}

// sqlTables is the table names GetTables lists.
func sqlTables(ctx context.Context, sc *flightsql.Client, schemas bool) ([]string, error) {
	info, err := sc.GetTables(ctx, &flightsql.GetTablesOpts{IncludeSchema: schemas})
	if err != nil {
		return nil, err
	}
	r, err := get(ctx, sc.Client, info.Endpoint[0].Ticket.Ticket)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, v := range r.cols["table_name"] {
		names = append(names, v.(string))
	}
	return names, nil
}

// sqlMeta runs a catalog command: its info, then its ticket.
func sqlMeta(ctx context.Context, sc *flightsql.Client, info func(context.Context, ...grpc.CallOption) (*flight.FlightInfo, error)) error {
	fi, err := info(ctx)
	if err != nil {
		return err
	}
	s, err := sc.Client.DoGet(ctx, fi.Endpoint[0].Ticket)
	if err != nil {
		return err
	}
	return drain(s.Recv)
}

// TestHTTPOpenAndPathFree: with tokens, /metrics, /healthz and /readyz
// still answer without one, and no answer holds a filesystem path (of
// the root, or of anything under the temporary directory).
func TestHTTPOpenAndPathFree(t *testing.T) {
	srv, root := scopeServer(t)
	ctx := bearer(context.Background(), tokBare)
	if _, err := get(ctx, dial(t, srv), []byte(`{"dataset":"LIVE","series":["NOPE"]}`)); status.Code(err) != codes.NotFound {
		t.Fatalf("want a NotFound counted in the metrics: %v", err)
	}
	empty := startServer(t, Config{Root: t.TempDir(), HTTPAddr: "127.0.0.1:0", Tokens: srv.cfg.Tokens})
	for _, tc := range []struct {
		srv  *Server
		root string
		path string
		code int
		has  string
	}{
		{srv, root, "/metrics", 200, `servingsnap_dataset_rows{dataset="LIVE"} 5`},
		{srv, root, "/healthz", 200, `"status":"ok"`},
		{srv, root, "/readyz", 200, `"status":"ready"`},
		{empty, empty.cfg.Root, "/readyz", 503, `"status":"no datasets"`},
		{empty, empty.cfg.Root, "/healthz", 200, `"status":"ok"`},
		{empty, empty.cfg.Root, "/metrics", 200, `servingsnap_build_info`},
	} {
		code, body := httpGet(t, "http://"+tc.srv.HTTPAddr().String()+tc.path)
		if code != tc.code || !strings.Contains(body, tc.has) {
			t.Errorf("%s: %d, want %d with %s:\n%s", tc.path, code, tc.code, tc.has, truncate(body, 2000))
		}
		for _, p := range []string{tc.root, filepath.Dir(tc.root), os.TempDir()} {
			if strings.Contains(body, p) {
				t.Errorf("%s holds the path %s", tc.path, p)
			}
		}
	}
}

// TestScopesSharded: datasets=PET covers PET's shard datasets and the
// sharded name; a shard's own name covers that shard alone.
func TestScopesSharded(t *testing.T) {
	const (
		tokPET    = "pet-token-0123456789"
		tokALL    = "all-token-0123456789"
		tokShard1 = "shard1-token-0123456789"
	)
	lines, err := ParseTokens("tokens", []byte(tokPET+" scopes=read datasets=PET\n"+tokALL+" scopes=read datasets=ALL\n"+tokShard1+" scopes=read datasets=PET.shard-0001\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := NewTokenSet(lines...)
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, Config{Root: shardedRoot(t), Tokens: toks})
	c := dial(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tc := range []struct {
		tok  string
		list []string
	}{
		{tokPET, []string{"PET.shard-0000", "PET.shard-0001", "PET.shard-0002", "PET"}},
		{tokALL, []string{"ALL"}},
		{tokShard1, []string{"PET.shard-0001"}},
	} {
		if got, err := listNames(bearer(ctx, tc.tok), c, ""); err != nil || !slices.Equal(got, tc.list) {
			t.Errorf("ListFlights with %s: %v %v, want %v", tc.tok, got, err, tc.list)
		}
	}
	pathPET := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"PET"}}
	for _, tc := range []struct {
		tok    string
		ticket string // "": GetFlightInfo of path [PET]
		want   codes.Code
	}{
		{tokPET, "", codes.OK},
		{tokALL, "", codes.PermissionDenied},
		{tokShard1, "", codes.PermissionDenied},
		{tokPET, `{"dataset":"PET","prefix":"","shard":1}`, codes.OK},
		{tokShard1, `{"dataset":"PET","prefix":"","shard":1}`, codes.PermissionDenied},
		{tokPET, `{"dataset":"PET.shard-0001","prefix":""}`, codes.OK},
		{tokShard1, `{"dataset":"PET.shard-0001","prefix":""}`, codes.OK},
		{tokShard1, `{"dataset":"PET.shard-0002","prefix":""}`, codes.PermissionDenied},
		{tokALL, `{"dataset":"PET.shard-0001","prefix":""}`, codes.PermissionDenied},
	} {
		var err error
		if tc.ticket == "" {
			_, err = c.GetFlightInfo(bearer(ctx, tc.tok), pathPET)
		} else {
			_, err = get(bearer(ctx, tc.tok), c, []byte(tc.ticket))
		}
		if status.Code(err) != tc.want {
			t.Errorf("%s %s: %v, want %v", tc.tok, tc.ticket, err, tc.want)
		}
	}
}
