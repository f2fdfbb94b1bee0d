//go:build !invariants

package snapshot

// trackLeaks is a no-op without -tags invariants (see invariants_on.go).
func trackLeaks(*Snapshot) {}
