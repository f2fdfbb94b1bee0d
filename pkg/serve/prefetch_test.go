package serve

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// TestPrefetch: the start-up read-ahead waits for the first answer, then
// reads what the budget allows (every index first) and says so in the log;
// a budget of 0 starts none.
func TestPrefetch(t *testing.T) {
	defer func(d time.Duration) { prefetchDelay = d }(prefetchDelay)
	prefetchDelay = time.Hour // only an answer starts it
	var index, data int64
	for _, name := range []string{"MIX", "SYN"} {
		s, err := snapshot.Open(filepath.Join(root(t), name), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		index += s.Bytes(snapshot.PartIndex)
		data += s.Bytes(snapshot.PartData)
		s.Close()
	}
	for _, tc := range []struct {
		name   string
		budget int64
		files  int // read ahead; -1: no read-ahead at all
		bytes  int64
	}{
		{"everything", index + data, 4, index + data},
		{"the indexes", index, 2, index},
		{"none", 0, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &logRecorder{}
			srv := startServer(t, Config{Options: Options{PrefetchBytes: tc.budget, Logger: slog.New(recHandler{r: logs})}})
			p := srv.Service().prefetch
			if tc.files < 0 {
				if p != nil {
					t.Fatal("a read-ahead with a budget of 0")
				}
				return
			}
			if p == nil {
				t.Fatal("no read-ahead")
			}
			time.Sleep(20 * time.Millisecond)
			select {
			case <-p.done:
				t.Fatal("the read-ahead ended before any answer")
			default:
			}
			c := dial(t, srv)
			if _, err := get(context.Background(), c, ticket(map[string]any{"dataset": "SYN", "prefix": ""})); err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.done:
			case <-time.After(30 * time.Second):
				t.Fatal("the read-ahead did not end after the first answer")
			}
			var got []string
			for _, r := range logs.take() {
				if r.msg != "read ahead" {
					continue
				}
				got = append(got, r.attrs["files"]+" files, "+r.attrs["bytes"]+" bytes")
			}
			want := strconv.Itoa(tc.files) + " files, " + strconv.FormatInt(tc.bytes, 10) + " bytes"
			if len(got) != 1 || got[0] != want {
				t.Errorf("read ahead logged %q, want [%q]", got, want)
			}
		})
	}
}

// TestParseMemAvailable: the MemAvailable line of /proc/meminfo in bytes;
// a missing or malformed line is an error saying so.
func TestParseMemAvailable(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     int64
		err      string
	}{
		{"usual", "MemTotal:       24684544 kB\nMemFree:        12902400 kB\nMemAvailable:   23112704 kB\nBuffers: 1 kB\n", 23112704 << 10, ""},
		{"zero", "MemAvailable: 0 kB\n", 0, ""},
		{"missing", "MemTotal:       24684544 kB\n", 0, "no MemAvailable line"},
		{"no unit", "MemAvailable:   23112704\n", 0, "unexpected line"},
		{"not a number", "MemAvailable:   lots kB\n", 0, "unexpected line"},
		{"negative", "MemAvailable:   -5 kB\n", 0, "unexpected line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMemAvailable(strings.NewReader(tc.in))
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want %q", err, tc.err)
				}
			case err != nil:
				t.Error(err)
			case got != tc.want:
				t.Errorf("%d, want %d", got, tc.want)
			}
		})
	}
	if avail, err := memAvailable(); err != nil || avail <= 0 {
		t.Errorf("memAvailable on this machine: %d, %v", avail, err)
	}
}
