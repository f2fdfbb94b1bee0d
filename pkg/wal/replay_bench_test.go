package wal

import (
	"context"
	"testing"
)

// BenchmarkReplayRetained measures the start-up replay's read of 64 MiB of
// 200 KiB records whose payloads the caller keeps (BenchmarkReplay's log).
func BenchmarkReplayRetained(b *testing.B) {
	w, err := Open(benchDir(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	p := payload(1, 200<<10)
	var total int64
	for total < 64<<20 {
		batch := [][]byte{p, p, p, p, p, p, p, p}
		if _, err := w.Append(context.Background(), batch...); err != nil {
			b.Fatal(err)
		}
		total += int64(len(batch) * len(p))
	}
	b.SetBytes(total)
	b.ReportAllocs()
	for b.Loop() {
		if err := w.ReplayRetained(Position{}, func(Position, []byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
