package wal

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// The crash test re-runs this test binary as a child that appends in a loop
// from several goroutines and writes a line to a pipe after each Append
// returns. The parent kills it with SIGKILL at a random moment, then opens
// the log: every acknowledged record must replay, at its acknowledged
// position, and each writer's records must form a gap-free prefix.

const (
	crashDirEnv   = "WAL_CRASH_DIR"
	crashTrialEnv = "WAL_CRASH_TRIAL"
	crashWriters  = 4
	crashSegment  = 128 << 10 // small, so that kills land around rollovers too
)

// crashPayload is record seq of writer g in trial: a 16-byte key, then bytes
// derived from it, so a replayed payload proves its own content.
func crashPayload(trial, g, seq int) []byte {
	n := 16 + (trial*7919+g*104729+seq*31)%6000
	b := payload(trial<<40|g<<32|seq, n)
	binary.LittleEndian.PutUint32(b[0:], uint32(trial))
	binary.LittleEndian.PutUint32(b[4:], uint32(g))
	binary.LittleEndian.PutUint64(b[8:], uint64(seq))
	return b
}

func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("run by TestCrash")
	}
	trial, _ := strconv.Atoi(os.Getenv(crashTrialEnv))
	acks := os.NewFile(3, "acks")
	w, err := Open(dir, Options{SegmentSize: crashSegment})
	if err != nil {
		fmt.Fprintln(acks, "error", err)
		os.Exit(1)
	}
	deadline := time.Now().Add(10 * time.Second) // never outlive a broken parent
	done := make(chan struct{})
	for g := range crashWriters {
		go func() {
			for seq := 0; time.Now().Before(deadline); {
				n := 1 + seq%3 // one to three records per call
				ps := make([][]byte, n)
				for i := range ps {
					ps[i] = crashPayload(trial, g, seq+i)
				}
				pos, err := w.Append(context.Background(), ps...)
				if err != nil {
					fmt.Fprintln(acks, "error", err)
					os.Exit(1)
				}
				// One write per line: the pipe keeps lines whole.
				fmt.Fprintf(acks, "ack %d %d %d %d\n", g, seq, n, pos.Uint64())
				seq += n
			}
			done <- struct{}{}
		}()
	}
	for range crashWriters {
		<-done
	}
	os.Exit(0)
}

type crashKey struct{ trial, g, seq int }

func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	acked := map[crashKey]Position{} // last record of each acknowledged call
	truncations := 0
	const trials = 20
	for trial := range trials {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashTrialEnv+"="+strconv.Itoa(trial))
		cmd.ExtraFiles = []*os.File{pw}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pw.Close()

		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Kill at a random moment once the child is appending.
		first, ok := <-lines
		if !ok {
			cmd.Wait()
			t.Fatalf("trial %d: child exited before its first append", trial)
		}
		time.Sleep(time.Duration(rng.IntN(60_000)) * time.Microsecond)
		cmd.Process.Kill() // SIGKILL
		cmd.Wait()
		pr.Close()
		n := 0
		for line := range chainFirst(first, lines) {
			var g, seq, calls int
			var pos uint64
			if _, err := fmt.Sscanf(line, "ack %d %d %d %d", &g, &seq, &calls, &pos); err != nil {
				t.Fatalf("trial %d: child says %q", trial, line)
			}
			acked[crashKey{trial, g, seq + calls - 1}] = PositionFromUint64(pos)
			n++
		}

		w, err := Open(dir, Options{SegmentSize: crashSegment})
		if err != nil {
			t.Fatalf("trial %d: open after kill: %v", trial, err)
		}
		if tr := w.Truncated(); tr != nil {
			truncations++
			t.Logf("trial %d: %v", trial, tr)
		}
		next := map[[2]int]int{} // (trial, writer) -> next expected seq
		replayed := map[crashKey]Position{}
		err = w.Replay(Position{}, func(pos Position, p []byte) error {
			if len(p) < 16 {
				return fmt.Errorf("short payload at %v", pos)
			}
			k := crashKey{int(binary.LittleEndian.Uint32(p)), int(binary.LittleEndian.Uint32(p[4:])), int(binary.LittleEndian.Uint64(p[8:]))}
			if !bytes.Equal(p, crashPayload(k.trial, k.g, k.seq)) {
				return fmt.Errorf("payload at %v is not record %v", pos, k)
			}
			if want := next[[2]int{k.trial, k.g}]; k.seq != want {
				return fmt.Errorf("at %v: writer %d of trial %d has record %d, want %d (a gap)", pos, k.g, k.trial, k.seq, want)
			}
			next[[2]int{k.trial, k.g}] = k.seq + 1
			replayed[k] = pos
			return nil
		})
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		for k, pos := range acked {
			if got, ok := replayed[k]; !ok || got != pos {
				t.Fatalf("trial %d: acknowledged record %v at %v replays at %v (%v)", trial, k, pos, got, ok)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("trial %d: %d acks, %d records in the log", trial, n, len(replayed))
	}
	t.Logf("%d of %d kills left a torn tail", truncations, trials)
}

func chainFirst(first string, rest <-chan string) func(func(string) bool) {
	return func(yield func(string) bool) {
		if !yield(first) {
			return
		}
		for s := range rest {
			if !yield(s) {
				return
			}
		}
	}
}
