package arrowfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ReadAhead brings the mapped file into the page cache, from its start, a
// chunk at a time (rounded up to whole pages), and returns once every page
// is there (or ctx is done, or a read failed). Each chunk is asked of the
// kernel (POSIX_FADV_WILLNEED) one chunk before it is waited for, so at
// most two chunks are queued at the device: a query that faults a page
// meanwhile waits behind those, not behind the whole file. It reads
// through a descriptor of its own and finds what is missing with mincore,
// so a file cut short meanwhile ends it with an error, not SIGBUS.
//
// Each chunk read is then mapped into the process (MADV_POPULATE_READ,
// Linux 5.14 and later; skipped where the kernel refuses it): a page in
// the page cache but not in the process's page tables still costs a query
// a (minor) fault on first touch, 1.2 a one-series query in the server
// trace, and the rare one that waits on the address space's lock is a
// tail latency. The pages are still the page cache's, counted in RssFile
// and evictable; RssAnon does not grow.
func (m *Mapped) ReadAhead(ctx context.Context, chunk int64) error {
	if m == nil || len(m.Data) == 0 {
		return nil
	}
	if chunk <= 0 {
		return fmt.Errorf("read ahead %s: chunk %d: want a positive size", m.Path, chunk)
	}
	page := int64(os.Getpagesize())
	chunk = (chunk + page - 1) / page * page
	f, err := os.Open(m.Path)
	if err != nil {
		return fmt.Errorf("read ahead: %w", err)
	}
	defer f.Close()
	r := reader{fd: int(f.Fd()), data: m.Data, page: page, path: m.Path}
	size := int64(len(m.Data))
	if err := r.ask(0, chunk); err != nil {
		return err
	}
	for off := int64(0); off < size; off += chunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.ask(off+chunk, chunk); err != nil {
			return err
		}
		if err := r.await(off, min(off+chunk, size)); err != nil {
			return err
		}
		if err := r.populate(off, min(off+chunk, size)); err != nil {
			return err
		}
	}
	return nil
}

// populateRefused is set once the kernel has refused MADV_POPULATE_READ
// (EINVAL: older than 5.14): reading ahead still fills the page cache.
var populateRefused atomic.Bool

// populate maps [off, end) of the file, already in the page cache, into
// the process's page tables. It fails where a query's touch would have
// raised SIGBUS (EFAULT: the file cut short while mapped) or the kernel
// is out of memory for the page tables (ENOMEM); either ends the
// read-ahead, and queries fault the rest in as they touch it.
func (r *reader) populate(off, end int64) error {
	if populateRefused.Load() {
		return nil
	}
	err := unix.Madvise(r.data[off:end], unix.MADV_POPULATE_READ)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS):
		populateRefused.Store(true)
		return nil
	case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
		return nil // pages left for the queries to fault in
	case errors.Is(err, unix.EFAULT): // what a touch would have raised SIGBUS for
		return fmt.Errorf("read ahead %s: map [%d, %d): %w (file changed while mapped?)", r.path, off, end, err)
	}
	return fmt.Errorf("read ahead %s: map [%d, %d): %w", r.path, off, end, err)
}

// reader reads a mapped file's pages into the page cache through fd.
type reader struct {
	fd   int
	data []byte // the mapping: only its addresses are used (mincore)
	page int64
	path string
	vec  []byte // mincore's answer, one byte a page
	one  [1]byte
}

// ask queues the read of [off, off+n) (clipped to the file).
func (r *reader) ask(off, n int64) error {
	size := int64(len(r.data))
	if off >= size {
		return nil
	}
	if err := unix.Fadvise(r.fd, off, min(n, size-off), unix.FADV_WILLNEED); err != nil {
		return fmt.Errorf("read ahead %s: %w", r.path, err)
	}
	return nil
}

// await returns once every page of [off, end) is in the page cache: it
// finds the first page that is not (mincore) and reads a byte of it, which
// waits for the read already queued or reads it anew, then looks again
// past it. off is a multiple of the page size.
func (r *reader) await(off, end int64) error {
	for p := off; p < end; {
		n := int((end - p + r.page - 1) / r.page)
		if cap(r.vec) < n {
			r.vec = make([]byte, n)
		}
		vec := r.vec[:n]
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&r.data[p])), uintptr(end-p), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
			return fmt.Errorf("read ahead %s: mincore: %w", r.path, e)
		}
		i := 0
		for i < n && vec[i]&1 != 0 {
			i++
		}
		if i == n {
			return nil
		}
		q := p + int64(i)*r.page
		if k, err := unix.Pread(r.fd, r.one[:], q); err != nil || k != 1 {
			return fmt.Errorf("read ahead %s at %d: read %d bytes, %v (file changed while mapped?)", r.path, q, k, err)
		}
		p = q + r.page
	}
	return nil
}
