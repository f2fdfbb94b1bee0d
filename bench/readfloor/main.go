// Command readfloor is the read path's floor: a Flight server that answers
// one-series tickets with bytes encoded before it starts listening. Its
// DoGet looks the ticket up in a map and sends the stored messages; no
// plan, no batch, no encoding. Latency measured against it is what gRPC,
// the loopback and the client cost on this machine, the physical limit of
// a one-series answer, so servingsnap's one-series latency is reported as
// a ratio to it (bench/readfloor.py).
//
//	go run ./bench/readfloor --root ROOT --dataset NAME [--addr HOST:PORT] [--max-series N]
//
// The answers are servingsnap's own (pkg/serve's DoGet run in process for
// the ticket {"dataset":NAME,"series":[ID]} of every series id, the form
// the benchmark client sends), so both servers send the same bytes. Any
// other ticket is refused. It prints one JSON line
// {"event": "listening", "flight": ..., "startup_ms": ..., "series": ..., "bytes": ...}
// once it listens.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/energyscope/servingsnap/pkg/serve"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// The gRPC options are servingsnap's (pkg/serve/server.go), without its
// middleware.
const (
	recvMsgBytes = 16 << 20
	sendMsgBytes = 256 << 20
)

func main() {
	root := flag.String("root", "", "serving root (as for snapserve --root)")
	name := flag.String("dataset", "", "dataset to answer")
	addr := flag.String("addr", "127.0.0.1:8817", "listen address HOST:PORT")
	maxSeries := flag.Int("max-series", 0, "encode at most this many series (0: every one)")
	flag.Parse()
	if *root == "" || *name == "" {
		fmt.Fprintln(os.Stderr, "readfloor: --root and --dataset are required")
		os.Exit(2)
	}
	t0 := time.Now()
	answers, bytes, err := encodeAll(*root, *name, *maxSeries)
	if err != nil {
		fmt.Fprintln(os.Stderr, "readfloor:", err)
		os.Exit(1)
	}
	srv := flight.NewServerWithMiddleware(nil,
		grpc.MaxRecvMsgSize(recvMsgBytes),
		grpc.MaxSendMsgSize(sendMsgBytes),
		grpc.NumStreamWorkers(uint32(4*runtime.GOMAXPROCS(0))),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	)
	if err := srv.Init(*addr); err != nil {
		fmt.Fprintln(os.Stderr, "readfloor:", err)
		os.Exit(1)
	}
	srv.RegisterFlightService(&floor{answers: answers})
	srv.SetShutdownOnSignals(syscall.SIGTERM, os.Interrupt)
	ev, _ := json.Marshal(map[string]any{
		"event": "listening", "flight": "grpc+tcp://" + srv.Addr().String(),
		"startup_ms": float64(time.Since(t0).Microseconds()) / 1e3, "series": len(answers), "bytes": bytes,
	})
	fmt.Println(string(ev))
	if err := srv.Serve(); err != nil {
		fmt.Fprintln(os.Stderr, "readfloor:", err)
		os.Exit(1)
	}
}

// floor answers from the stored messages.
type floor struct {
	flight.BaseFlightServer
	answers map[string][]*flight.FlightData // by ticket bytes
}

func (f *floor) DoGet(t *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	msgs, ok := f.answers[string(t.GetTicket())]
	if !ok {
		return fmt.Errorf("readfloor answers one-series tickets of its dataset only, not %.200q", t.GetTicket())
	}
	for _, m := range msgs {
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	return nil
}

// oneTicket is the ticket the benchmark client sends for one series
// (Python's json.dumps with separators (",", ":"); ids are ASCII).
func oneTicket(dataset, id string) ([]byte, error) {
	return json.Marshal(struct {
		Dataset string   `json:"dataset"`
		Series  []string `json:"series"`
	}{dataset, []string{id}})
}

// encodeAll runs servingsnap's DoGet in process for every series' ticket
// and keeps copies of the messages it sends. Messages equal across series
// (the schema) are stored once.
func encodeAll(root, name string, maxSeries int) (map[string][]*flight.FlightData, int64, error) {
	svc, err := serve.Open(root, serve.Options{Limits: serve.DefaultLimits})
	if err != nil {
		return nil, 0, err
	}
	defer svc.Close()
	ids, err := seriesIDs(filepath.Join(root, name))
	if err != nil {
		return nil, 0, err
	}
	if maxSeries > 0 && len(ids) > maxSeries {
		ids = ids[:maxSeries]
	}
	shared := map[string]*flight.FlightData{}
	answers := make(map[string][]*flight.FlightData, len(ids))
	var total int64
	for _, id := range ids {
		tk, err := oneTicket(name, id)
		if err != nil {
			return nil, 0, err
		}
		st := &capture{ctx: context.Background()}
		if err := svc.DoGet(&flight.Ticket{Ticket: tk}, st); err != nil {
			return nil, 0, fmt.Errorf("series %q: %w", id, err)
		}
		for i, m := range st.msgs {
			if len(m.DataBody) == 0 {
				key := string(m.DataHeader)
				if s, ok := shared[key]; ok {
					st.msgs[i] = s
					continue
				}
				shared[key] = m
			}
			total += int64(len(m.DataHeader) + len(m.DataBody))
		}
		answers[string(tk)] = st.msgs
	}
	return answers, total, nil
}

// seriesIDs lists the series ids of the snapshot the dataset directory
// serves.
func seriesIDs(dir string) ([]string, error) {
	s, err := snapshot.Open(dir, snapshot.Options{})
	if err != nil {
		return nil, err
	}
	defer s.Release()
	x := s.Index()
	ids := make([]string, x.Len())
	for i := range ids {
		ids[i] = x.SeriesID(i)
	}
	return ids, nil
}

// capture is a DoGet stream keeping copies of what is sent.
type capture struct {
	flight.FlightService_DoGetServer // nil: only Context and Send are called
	ctx                              context.Context
	msgs                             []*flight.FlightData
}

func (c *capture) Context() context.Context { return c.ctx }

func (c *capture) Send(d *flight.FlightData) error {
	c.msgs = append(c.msgs, &flight.FlightData{
		DataHeader:  append([]byte(nil), d.DataHeader...),
		DataBody:    append([]byte(nil), d.DataBody...),
		AppMetadata: append([]byte(nil), d.AppMetadata...),
	})
	return nil
}
