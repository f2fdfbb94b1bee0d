package wal

import (
	"testing"
)

// BenchmarkReplayRetained measures the start-up replay's read of 64 MiB of
// 200 KiB records whose payloads the caller keeps (BenchmarkReplay's log).
func BenchmarkReplayRetained(b *testing.B) {
	w, total := replayBenchLog(b)
	defer w.Close()
	b.SetBytes(total)
	b.ReportAllocs()
	for b.Loop() {
		if err := w.ReplayRetained(Position{}, func(Position, []byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
