package arrowfile

import "os"

// writeBehindWindow is how much of a file being written may be dirty in
// the page cache before its writer waits for the disk.
const writeBehindWindow = 8 << 20

// writeBehind is the file under a Writer's buffer. Every window it writes,
// it has the kernel start writing that window out and waits for the window
// before it to be on disk, so a snapshot file being written holds at most
// two windows of dirty pages, instead of leaving them to the kernel's
// flusher until the fsync at Close.
//
// Why: a compaction writes a new snapshot (hundreds of MiB) beside a
// serving process whose WAL acknowledges each write after an fdatasync.
// On ext4 (data=ordered) that fdatasync commits the journal, and a commit
// first writes out the data of every file with blocks allocated in its
// transaction: with the snapshot's dirty pages left to pile up, a WAL sync
// waited for hundreds of MiB of them (fsync p99 67-75 ms, acks ~80 ms at
// 250k rows/s through compactions; BenchmarkIngestPaced with
// -ingest.compact-rows). With write-behind there is little to wait for.
// RocksDB's bytes_per_sync does the same for its SST files.
type writeBehind struct {
	f       *os.File
	written int64 // bytes written to f
	started int64 // bytes whose writeback was started
}

func (w *writeBehind) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.written += int64(n)
	for err == nil && w.written-w.started >= writeBehindWindow {
		startWriteback(w.f, w.started, writeBehindWindow)
		if w.started >= writeBehindWindow {
			waitWriteback(w.f, w.started-writeBehindWindow, writeBehindWindow)
		}
		w.started += writeBehindWindow
	}
	return n, err
}
