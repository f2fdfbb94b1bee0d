package progress

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestJSON: one line per update, throttled per phase, the first and the
// last always written, an ETA from the rate so far, nothing after Done.
func TestJSON(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	r := JSON(&buf, "build", time.Second).(*jsonReporter)
	r.now = func() time.Time { return now }

	p := r.Phase("read", 100, 1000)
	now = now.Add(500 * time.Millisecond)
	p.Add(10, 100) // within the interval: no line
	now = now.Add(600 * time.Millisecond)
	p.Add(15, 150) // 25 rows after 1.1 s: a line, ETA 3.3 s
	p.Done()
	p.Done()
	p.Add(1, 1)

	var got []Update
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var u Update
		if err := json.Unmarshal([]byte(line), &u); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		got = append(got, u)
	}
	want := []Update{
		{Task: "build", Phase: "read", RowsTotal: 100, BytesTotal: 1000},
		{Task: "build", Phase: "read", Rows: 25, RowsTotal: 100, Bytes: 250, BytesTotal: 1000, Elapsed: 1.1, ETA: 3.3},
		{Task: "build", Phase: "read", Rows: 25, RowsTotal: 100, Bytes: 250, BytesTotal: 1000, Elapsed: 1.1, Done: true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i := range want {
		g := got[i]
		g.ETA = float64(int(g.ETA*10+0.5)) / 10
		if g != want[i] {
			t.Errorf("line %d: got %+v, want %+v", i, g, want[i])
		}
	}
}

func TestETA(t *testing.T) {
	for _, c := range []struct {
		elapsed                    float64
		rows, rowsT, bytes, bytesT int64
		want                       float64
	}{
		{10, 50, 100, 0, 0, 10},
		{10, 0, 0, 25, 100, 30}, // no row total: by bytes
		{10, 0, 100, 0, 0, 0},   // nothing done yet
		{10, 100, 100, 0, 0, 0}, // finished
		{10, 5, 0, 5, 0, 0},     // no totals
	} {
		if got := eta(c.elapsed, c.rows, c.rowsT, c.bytes, c.bytesT); got != c.want {
			t.Errorf("eta%v = %v, want %v", c, got, c.want)
		}
	}
}

func TestOr(t *testing.T) {
	if Or(nil) != Nop {
		t.Error("Or(nil) is not Nop")
	}
	var buf bytes.Buffer
	j := JSON(&buf, "x", 0)
	if Or(j) != j {
		t.Error("Or(r) is not r")
	}
}

// TestFinish: a phase ends as done only when its work succeeded; a
// failed one never reports done.
func TestFinish(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		wantDone bool
	}{
		{"ok", nil, true},
		{"failed", errors.New("disk full"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			p := JSON(&buf, "build", time.Hour).Phase("scan", 0, 0)
			Finish(p, tc.err)
			done := strings.Contains(buf.String(), `"done":true`)
			if done != tc.wantDone {
				t.Errorf("done reported %v, want %v:\n%s", done, tc.wantDone, buf.String())
			}
		})
	}
}
