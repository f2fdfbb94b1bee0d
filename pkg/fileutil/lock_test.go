package fileutil

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWaitLockContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "LOCK")
	held, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if pid := LockHolder(path); pid != os.Getpid() {
		t.Errorf("LockHolder = %d, want this process %d", pid, os.Getpid())
	}

	waited := 0
	start := time.Now()
	_, err = WaitLockContext(context.Background(), path, 100*time.Millisecond, func() { waited++ })
	if !errors.Is(err, ErrLocked) || waited != 1 || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("timeout: err %v, waiting called %d times after %s", err, waited, time.Since(start))
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := WaitLockContext(ctx, path, 0, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}

	time.AfterFunc(50*time.Millisecond, func() { held.Release() })
	waited = 0
	l, err := WaitLockContext(context.Background(), path, 10*time.Second, func() { waited++ })
	if err != nil || waited != 1 {
		t.Fatalf("after release: %v, waiting called %d times", err, waited)
	}
	if _, err := TryLock(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("the lock WaitLockContext returned is not held: %v", err)
	}
	l.Release()

	waited = 0
	l, err = WaitLockContext(context.Background(), path, time.Second, func() { waited++ })
	if err != nil || waited != 0 {
		t.Fatalf("free lock: %v, waiting called %d times", err, waited)
	}
	l.Release()
	if pid := LockHolder(path); pid != 0 {
		t.Errorf("LockHolder of a free lock = %d", pid)
	}
}
