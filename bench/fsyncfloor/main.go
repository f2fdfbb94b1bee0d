// Command fsyncfloor measures the disk's own durable-write floor: the
// latency of one write plus fdatasync at a fixed pace, with no server, no
// WAL framing and no Arrow in the way. It is the evidence behind the live
// ingest benchmark's acknowledgement tail: an acknowledgement
// waits for an fdatasync, so its p99 cannot be lower than what this disk
// gives a bare loop.
//
//	go run ./bench/fsyncfloor -dir DIR [-d 20s] [-every 10ms] [-size 262144] [-burn N] [-alloc] [-pre] [-depth N]
//
// The defaults match the paced ingest benchmark at 1M rows/s in 10k-row
// batches (one group commit of about 256 KiB every 10 ms). -burn adds N
// busy goroutines and -alloc makes them allocate, to see whether CPU or
// GC load moves the figure; -pre writes the file full of zeros and syncs
// it first, so that the measured writes overwrite allocated blocks and
// fdatasync has no metadata to commit (the WAL segment preallocation that
// was measured and left out: docs/OPERATIONS.md, "Write-path choices").
//
// -depth N measures a group-commit log instead of a bare loop: writes are
// due at the pace, a committer writes whatever is due as one batch and
// fsyncs it, with up to N fsyncs running at once, and a write counts as
// durable when its fsync and every earlier one have returned. The figure
// is then from due to durable, queueing included. -depth 1 is pkg/wal's
// committer, which waits for each fsync before its next write; -depth 2
// is a pipelined committer, which measured no better (docs/OPERATIONS.md,
// "Write-path choices"), so pkg/wal keeps one fsync in flight.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"
)

func main() {
	dir := flag.String("dir", ".", "directory on the disk to measure")
	dur := flag.Duration("d", 20*time.Second, "how long to measure")
	every := flag.Duration("every", 10*time.Millisecond, "pace of the writes")
	size := flag.Int("size", 256<<10, "bytes per write")
	burn := flag.Int("burn", 0, "busy goroutines running alongside")
	alloc := flag.Bool("alloc", false, "the busy goroutines allocate 1 MiB per loop")
	pre := flag.Bool("pre", false, "prewrite the file with zeros and overwrite it")
	depth := flag.Int("depth", 0, "measure a group-commit log with up to N fsyncs at once, from due to durable (0: the bare loop)")
	flag.Parse()
	if err := run(*dir, *dur, *every, *size, *burn, *alloc, *pre, *depth); err != nil {
		fmt.Fprintln(os.Stderr, "fsyncfloor:", err)
		os.Exit(1)
	}
}

func run(dir string, dur, every time.Duration, size, burn int, alloc, pre bool, depth int) error {
	if every <= 0 || size <= 0 || dur < every || depth < 0 {
		return fmt.Errorf("need -every > 0, -size > 0, -d >= -every and -depth >= 0")
	}
	stop := make(chan struct{})
	defer close(stop)
	for i := 0; i < burn; i++ {
		go busy(stop, alloc)
	}
	path := filepath.Join(dir, fmt.Sprintf("fsyncfloor-%d.dat", os.Getpid()))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	defer f.Close()
	buf := make([]byte, size)
	if pre {
		for i := 0; i < int(dur/every)+10; i++ {
			if _, err := f.Write(buf); err != nil {
				return fmt.Errorf("%s: prewrite: %w", path, err)
			}
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("%s: prewrite sync: %w", path, err)
		}
		if _, err := f.Seek(0, 0); err != nil {
			return err
		}
	}
	for i := range buf {
		buf[i] = byte(i)
	}
	if depth > 0 {
		lat, err := groupCommit(f, buf, dur, every, depth)
		if err != nil {
			return err
		}
		report(fmt.Sprintf("pre=%v burn=%d alloc=%v depth=%d writes=%d (due to durable)", pre, burn, alloc, depth, len(lat)), lat)
		return nil
	}
	var lat []time.Duration
	tick := time.NewTicker(every)
	defer tick.Stop()
	for end := time.Now().Add(dur); time.Now().Before(end); {
		<-tick.C
		if _, err := f.Write(buf); err != nil {
			return fmt.Errorf("%s: write: %w", path, err)
		}
		t := time.Now()
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return fmt.Errorf("%s: fdatasync: %w", path, err)
		}
		lat = append(lat, time.Since(t))
	}
	report(fmt.Sprintf("pre=%v burn=%d alloc=%v syncs=%d", pre, burn, alloc, len(lat)), lat)
	return nil
}

// report prints what, then the quantiles of lat.
func report(what string, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	over := 0
	for _, l := range lat {
		if l > 20*time.Millisecond {
			over++
		}
	}
	fmt.Printf("%s p50=%v p99=%v p999=%v max=%v over20ms=%d\n", what, q(.5), q(.99), q(.999), lat[len(lat)-1], over)
}

// groupCommit appends buf to f once per every for dur, through a
// committer with up to depth fsyncs running, and returns each write's
// latency from its due time to its durability (its fsync and every
// earlier one returned).
func groupCommit(f *os.File, buf []byte, dur, every time.Duration, depth int) ([]time.Duration, error) {
	n := int(dur / every)
	due := make(chan time.Time, n)
	go func() {
		begin := time.Now()
		for k := range n {
			at := begin.Add(time.Duration(k) * every)
			time.Sleep(time.Until(at))
			due <- at
		}
	}()
	type batch struct {
		due  []time.Time
		took chan error // the fsync's result
	}
	syncing := make(chan batch, n) // to the lander, in log order
	running := make(chan struct{}, depth)
	var lat []time.Duration
	landed := make(chan error)
	go func() { // lands batches in order
		var err error
		for b := range syncing {
			if e := <-b.took; e != nil && err == nil {
				err = e
			}
			now := time.Now()
			for _, d := range b.due {
				lat = append(lat, now.Sub(d))
			}
		}
		landed <- err
	}()
	var off int64
	for got := 0; got < n; {
		ds := []time.Time{<-due}
		for more := true; more; {
			select {
			case d := <-due:
				ds = append(ds, d)
			default:
				more = false
			}
		}
		got += len(ds)
		b := batch{due: ds, took: make(chan error, 1)}
		running <- struct{}{} // blocks while depth fsyncs run
		syncing <- b
		for range ds {
			if _, err := f.WriteAt(buf, off); err != nil {
				return nil, fmt.Errorf("%s: write: %w", f.Name(), err)
			}
			off += int64(len(buf))
		}
		go func() {
			err := syscall.Fdatasync(int(f.Fd()))
			<-running
			b.took <- err
		}()
	}
	close(syncing)
	if err := <-landed; err != nil {
		return nil, fmt.Errorf("%s: fdatasync: %w", f.Name(), err)
	}
	return lat, nil
}

// busy spins until stop is closed, allocating garbage when alloc is set.
func busy(stop <-chan struct{}, alloc bool) {
	var sink []byte
	for x := 0; ; {
		select {
		case <-stop:
			_ = sink
			return
		default:
		}
		for j := 0; j < 1e6; j++ {
			x += j
		}
		if alloc {
			sink = make([]byte, 1<<20)
		}
	}
}
