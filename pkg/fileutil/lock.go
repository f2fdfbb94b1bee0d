package fileutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrLocked is returned by TryLock when another process holds the lock.
var ErrLocked = errors.New("locked by another process")

// Lock is an exclusive advisory lock on a file (flock). The kernel drops it
// when the process dies, so a crashed writer never leaves a stale lock.
type Lock struct{ f *os.File }

// TryLock takes the lock on path (creating the file) without waiting.
func TryLock(path string) (*Lock, error) {
	return lock(path, syscall.LOCK_EX|syscall.LOCK_NB)
}

func lock(path string, how int) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Release drops the lock.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

// TryShared takes a shared lock on path without waiting. Readers hold
// shared locks; an exclusive TryLock fails while any reader holds one.
// The file must exist unless create is true.
func TryShared(path string, create bool) (*Lock, error) {
	flags := os.O_RDONLY
	if create {
		flags = os.O_RDWR | os.O_CREATE
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil && create {
		// A reader without write access can still lock an existing file.
		f, err = os.OpenFile(path, os.O_RDONLY, 0)
	}
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// WaitLockContext takes the lock on path, waiting while another process
// (or another open file of this one) holds it: until it is free, until
// timeout has passed (0: no limit) or until ctx is done. If the lock is
// held when asked for, waiting is called once before the wait begins, so a
// command can say why it is not progressing. A timeout is an ErrLocked
// error; a done ctx is ctx's error.
//
// It polls rather than blocking in flock(2), because a blocked flock can
// be neither timed out nor cancelled.
func WaitLockContext(ctx context.Context, path string, timeout time.Duration, waiting func()) (*Lock, error) {
	l, err := TryLock(path)
	if !errors.Is(err, ErrLocked) {
		return l, err
	}
	if waiting != nil {
		waiting()
	}
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	pause := 10 * time.Millisecond
	for {
		tick := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			tick.Stop()
			return nil, ctx.Err()
		case <-deadline:
			tick.Stop()
			return nil, fmt.Errorf("lock %s: still held after %s: %w", path, timeout, ErrLocked)
		case <-tick.C:
		}
		l, err := TryLock(path)
		if !errors.Is(err, ErrLocked) {
			return l, err
		}
		if pause < 250*time.Millisecond {
			pause *= 2
		}
	}
}

// LockHolder returns the id of a process holding a flock on path, read
// from /proc/locks (Linux), or 0 when it cannot tell. It is for messages
// only: by the time it returns the holder may have gone.
func LockHolder(path string) int {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0
	}
	// "1: FLOCK  ADVISORY  WRITE 1234 08:01:123456 0 EOF": the device is
	// major:minor in hex, then the inode in decimal.
	want := fmt.Sprintf(":%d", st.Ino)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" || !strings.HasSuffix(f[5], want) {
			continue
		}
		dev := strings.Split(f[5], ":")
		if len(dev) != 3 {
			continue
		}
		maj, err1 := strconv.ParseUint(dev[0], 16, 32)
		min, err2 := strconv.ParseUint(dev[1], 16, 32)
		if err1 != nil || err2 != nil || mkdev(maj, min) != uint64(st.Dev) {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil {
			return pid
		}
	}
	return 0
}

// mkdev encodes a device number the way Linux's stat reports it.
func mkdev(major, minor uint64) uint64 {
	return (major&0xfffff000)<<32 | (major&0xfff)<<8 | (minor&0xffffff00)<<12 | minor&0xff
}
