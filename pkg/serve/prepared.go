package serve

// Prepared statements: the one piece of server state a Flight SQL client
// makes and may forget to close.
//
// Each open statement is charged its cost (the SQL text, its parsed form,
// the bound parameters and a fixed overhead for the handle and its map
// entries) against two byte budgets: its connection's
// (Limits.MaxPreparedBytesPerClient) and the server's
// (Limits.MaxPreparedBytes); a connection also holds at most maxPrepared
// of them. What would exceed a budget is refused with ResourceExhausted
// naming the limit and its flag; nothing already open is evicted, so one
// client cannot push out another's statements.
//
// A statement belongs to the connection that prepared it (conns.go) and is
// only found from that connection: from any other it is NotFound, as an
// unknown handle is, so handles of other clients cannot be probed. When
// the connection ends every statement it made is released, and one left
// unused for Limits.PreparedTTL is released by a timer.
//
// Locking: preparedStore.mu guards everything in the store, the
// statements' params, bytes and used included; the functions that need it
// held end in Locked. It is never held while calling out of the store.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/sqlq"
)

// maxPrepared bounds the open prepared statements of one connection,
// whatever their size.
const maxPrepared = 4096

// preparedOverhead is what one open statement costs besides its text and
// parameters: the handle (twice: map key and owner's set), the entries,
// the structs.
const preparedOverhead = 1 << 10

// prepared is an open prepared statement. Params are the last bound
// values (nil before a bind).
type prepared struct {
	handle string
	sql    string
	st     *sqlq.Statement
	owner  *clientConn

	// guarded by preparedStore.mu
	params []string
	bytes  int64     // charged to the budgets
	used   time.Time // last prepare, bind, execute or schema
}

// account is what one connection holds.
type account struct {
	bytes   int64
	handles map[string]*prepared
}

// preparedStore holds the open prepared statements.
type preparedStore struct {
	total, perConn int64         // budgets; <= 0: none
	ttl            time.Duration // <= 0: never
	now            func() time.Time

	mu       sync.Mutex
	byHandle map[string]*prepared
	owners   map[*clientConn]*account // a nil key: calls from no connection
	bytes    int64
	sweep    *time.Timer // pending while a statement is open and ttl > 0
	closed   bool

	refused  *prometheus.CounterVec // by limit: connection, server, count
	released *prometheus.CounterVec // by reason: closed, disconnect, idle
}

func newPreparedStore(l Limits) *preparedStore {
	return &preparedStore{total: l.MaxPreparedBytes, perConn: l.MaxPreparedBytesPerClient, ttl: l.PreparedTTL, now: time.Now,
		byHandle: map[string]*prepared{}, owners: map[*clientConn]*account{},
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "servingsnap_prepared_refused_total", Help: "Flight SQL prepares and binds refused, by the limit they met (connection, server, count).",
		}, []string{"limit"}),
		released: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "servingsnap_prepared_released_total", Help: "Flight SQL prepared statements released, by why (closed, disconnect, idle).",
		}, []string{"reason"}),
	}
}

// register adds the store's metrics to r.
func (s *preparedStore) register(r prometheus.Registerer) {
	r.MustRegister(s.refused, s.released,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "servingsnap_prepared_statements", Help: "Flight SQL prepared statements open."},
			func() float64 { _, n, _, _ := s.usage(nil); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "servingsnap_prepared_bytes", Help: "Bytes the open Flight SQL prepared statements hold (text, parsed form, bound parameters, overhead), as charged to --max-prepared-bytes."},
			func() float64 { b, _, _, _ := s.usage(nil); return float64(b) }))
}

// statementBytes is what the parsed form of a statement holds beyond its
// text: the structs, and the literals (at most the text again).
func statementBytes(sql string, st *sqlq.Statement) int64 {
	n := int64(unsafe.Sizeof(*st)) + int64(len(sql))
	n += int64(len(st.Columns)) * int64(unsafe.Sizeof(sqlq.Ident{}))
	n += int64(len(st.Aggs)) * int64(unsafe.Sizeof(sqlq.Agg{}))
	n += int64(len(st.SelArgs)) * int64(unsafe.Sizeof(sqlq.Operand{}))
	n += int64(len(st.Periods)) * int64(unsafe.Sizeof(sqlq.PeriodCond{}))
	return n
}

func paramsBytes(params []string) int64 {
	n := int64(len(params)) * int64(unsafe.Sizeof(""))
	for _, p := range params {
		n += int64(len(p))
	}
	return n
}

// fmtBytes writes n exactly, and in MiB too from 1 MiB up.
func fmtBytes(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%d bytes (%.1f MiB)", n, float64(n)/(1<<20))
}

// add opens a statement for the connection of ctx and returns its handle.
func (s *preparedStore) add(ctx context.Context, sql string, st *sqlq.Statement) (string, error) {
	var id [16]byte
	rand.Read(id[:])
	p := &prepared{handle: hex.EncodeToString(id[:]), sql: sql, st: st, owner: connOf(ctx)}
	cost := preparedOverhead + int64(len(sql)) + statementBytes(sql, st)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || (p.owner != nil && p.owner.ended.Load()) {
		return "", errf(codes.Unavailable, "prepared statement: the connection is closing")
	}
	acct := s.owners[p.owner]
	if acct != nil && len(acct.handles) >= maxPrepared {
		s.expireLocked()
		if acct = s.owners[p.owner]; acct != nil && len(acct.handles) >= maxPrepared {
			s.refused.WithLabelValues("count").Inc()
			return "", errf(codes.ResourceExhausted, "prepared statement: this connection holds %d open prepared statements, the most one may; close some (ClosePreparedStatement)", maxPrepared)
		}
	}
	if err := s.chargeLocked(p.owner, cost); err != nil {
		return "", err
	}
	if acct = s.owners[p.owner]; acct == nil {
		acct = &account{handles: map[string]*prepared{}}
		s.owners[p.owner] = acct
	}
	p.bytes, p.used = cost, s.now()
	acct.bytes += cost
	s.bytes += cost
	acct.handles[p.handle] = p
	s.byHandle[p.handle] = p
	s.armLocked()
	return p.handle, nil
}

// chargeLocked checks that owner may hold delta more bytes (after
// releasing expired statements if it may not); it charges nothing.
// Requires s.mu held.
func (s *preparedStore) chargeLocked(owner *clientConn, delta int64) error {
	if delta <= 0 || s.overLocked(owner, delta) == "" {
		return nil
	}
	s.expireLocked()
	held := int64(0)
	if a := s.owners[owner]; a != nil {
		held = a.bytes
	}
	switch s.overLocked(owner, delta) {
	case "connection":
		s.refused.WithLabelValues("connection").Inc()
		return errf(codes.ResourceExhausted, "prepared statement: this connection's prepared statements and parameters would hold %s, over its limit of %s (--max-prepared-bytes-per-client); close some (ClosePreparedStatement)",
			fmtBytes(held+delta), fmtBytes(s.perConn))
	case "server":
		s.refused.WithLabelValues("server").Inc()
		return errf(codes.ResourceExhausted, "prepared statement: all connections' prepared statements and parameters would hold %s, over the server's limit of %s (--max-prepared-bytes); close some or retry later",
			fmtBytes(s.bytes+delta), fmtBytes(s.total))
	}
	return nil
}

// overLocked names the budget owner holding delta more bytes would
// exceed ("connection" or "server"), "" for none. Requires s.mu held.
func (s *preparedStore) overLocked(owner *clientConn, delta int64) string {
	held := int64(0)
	if a := s.owners[owner]; a != nil {
		held = a.bytes
	}
	switch {
	case s.perConn > 0 && held+delta > s.perConn:
		return "connection"
	case s.total > 0 && s.bytes+delta > s.total:
		return "server"
	}
	return ""
}

// lookup finds handle h for the connection of ctx and marks it used.
func (s *preparedStore) lookup(ctx context.Context, h []byte) (*prepared, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.byHandle[string(h)]
	if !ok || p.owner != connOf(ctx) {
		idle := ""
		if s.ttl > 0 {
			idle = fmt.Sprintf(", released after %s unused", s.ttl)
		}
		return nil, errf(codes.NotFound, "prepared statement %q not found on this connection (closed%s, released when the connection that prepared it closed, or prepared on another connection); prepare it again",
			query.Truncate(string(h), 64), idle)
	}
	p.used = s.now()
	return p, nil
}

// params returns p's bound parameters (nil before a bind).
func (s *preparedStore) params(p *prepared) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return p.params
}

// bind replaces p's parameters, charging the difference in size; on
// refusal the old ones stay.
func (s *preparedStore) bind(p *prepared, params []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byHandle[p.handle] != p {
		return errf(codes.NotFound, "prepared statement %q was closed or released while its parameters were bound; prepare it again", query.Truncate(p.handle, 64))
	}
	delta := paramsBytes(params) - paramsBytes(p.params)
	if err := s.chargeLocked(p.owner, delta); err != nil {
		return err
	}
	if s.byHandle[p.handle] != p { // expired by the charge's sweep
		return errf(codes.NotFound, "prepared statement %q was released after %s unused; prepare it again", query.Truncate(p.handle, 64), s.ttl)
	}
	p.params = params
	p.bytes += delta
	s.owners[p.owner].bytes += delta
	s.bytes += delta
	p.used = s.now()
	return nil
}

// close releases handle h if the connection of ctx made it; anything else
// is a no-op (closing is idempotent).
func (s *preparedStore) close(ctx context.Context, h []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.byHandle[string(h)]; ok && p.owner == connOf(ctx) {
		s.releaseLocked(p)
		s.released.WithLabelValues("closed").Inc()
	}
}

// releaseConn releases every statement c made (its connection ended).
func (s *preparedStore) releaseConn(c *clientConn) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.owners[c]
	if a == nil {
		return 0
	}
	n := len(a.handles)
	for _, p := range a.handles {
		s.releaseLocked(p)
	}
	s.released.WithLabelValues("disconnect").Add(float64(n))
	return n
}

// releaseLocked drops p and its charge. Requires s.mu held.
func (s *preparedStore) releaseLocked(p *prepared) {
	delete(s.byHandle, p.handle)
	s.bytes -= p.bytes
	if a := s.owners[p.owner]; a != nil {
		delete(a.handles, p.handle)
		a.bytes -= p.bytes
		if len(a.handles) == 0 {
			delete(s.owners, p.owner)
		}
	}
	p.params = nil
}

// expireLocked releases the statements unused for the TTL. Requires s.mu
// held.
func (s *preparedStore) expireLocked() int {
	if s.ttl <= 0 {
		return 0
	}
	cutoff := s.now().Add(-s.ttl)
	n := 0
	for _, p := range s.byHandle {
		if p.used.Before(cutoff) {
			s.releaseLocked(p)
			n++
		}
	}
	s.released.WithLabelValues("idle").Add(float64(n))
	return n
}

// armLocked schedules the next sweep of idle statements, if any are open
// and none is scheduled. Requires s.mu held.
func (s *preparedStore) armLocked() {
	if s.ttl <= 0 || s.sweep != nil || s.closed || len(s.byHandle) == 0 {
		return
	}
	tick := min(max(s.ttl/4, 10*time.Millisecond), time.Minute)
	s.sweep = time.AfterFunc(tick, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.sweep = nil
		s.expireLocked()
		s.armLocked()
	})
}

// usage is the bytes and statements held: by all, and by c.
func (s *preparedStore) usage(c *clientConn) (total int64, open int, connBytes int64, connOpen int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.owners[c]; a != nil {
		connBytes, connOpen = a.bytes, len(a.handles)
	}
	return s.bytes, len(s.byHandle), connBytes, connOpen
}

// shutdown releases everything and stops the sweeps.
func (s *preparedStore) shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.sweep != nil {
		s.sweep.Stop()
		s.sweep = nil
	}
	for _, p := range s.byHandle {
		s.releaseLocked(p)
	}
}
