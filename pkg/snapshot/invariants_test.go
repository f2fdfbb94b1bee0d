//go:build invariants

package snapshot

import (
	"runtime"
	"testing"
	"time"
)

// TestLeakedHandleIsReported drops an unreleased handle and checks the
// invariants build notices when the collector finds it.
func TestLeakedHandleIsReported(t *testing.T) {
	ds := sample(t)
	got := make(chan string, 1)
	old := leakReport
	leakReport = func(msg string) { got <- msg }
	defer func() { leakReport = old }()
	func() {
		s, err := Open(ds, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_ = s.ID() // never Closed
	}()
	deadline := time.After(5 * time.Second)
	for {
		runtime.GC()
		select {
		case msg := <-got:
			t.Logf("reported: %s", msg)
			return
		case <-deadline:
			t.Fatal("a leaked snapshot handle was not reported")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
