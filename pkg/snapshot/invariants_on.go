//go:build invariants

package snapshot

import (
	"fmt"
	"runtime"
)

// trackLeaks makes the garbage collector check that a handle is released
// before it becomes unreachable: a Snapshot collected with references left
// kept its files mapped for the life of the process. Built only with
// -tags invariants (as Pebble does), since finalizers cost and the check is
// for tests.
func trackLeaks(s *Snapshot) {
	runtime.SetFinalizer(s, func(s *Snapshot) {
		if n := s.refs.Load(); n > 0 {
			leakReport(fmt.Sprintf("snapshot %d of %s garbage-collected with %d references: a handle was never released", s.ID(), s.Dataset.Name, n))
		}
	})
}

// leakReport is what a detected leak does; tests replace it.
var leakReport = func(msg string) { panic(msg) }
