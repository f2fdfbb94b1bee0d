package arrowfile

import "golang.org/x/sys/unix"

// Access is how a mapping is about to be read, told to the kernel as
// madvise advice. It decides how much a page fault reads ahead: with the
// default, a fault reads the device's readahead window around the page
// (read_ahead_kb, 128 KiB on many machines, 8 MiB on some cloud disks), so
// touching one page in each of many places costs a window each.
type Access int

const (
	// AccessNormal is the kernel's default readahead.
	AccessNormal Access = iota
	// AccessRandom reads only the faulting pages: for touching a few
	// scattered pages, such as every record batch's metadata at open.
	AccessRandom
	// AccessSequential reads ahead aggressively and drops pages behind:
	// for one pass over every byte, such as a checksum.
	AccessSequential
)

// Advise tells the kernel how the mapping will be read next. It is a hint:
// an error (a kernel without madvise) changes nothing but speed, so it is
// returned for tests and otherwise ignored by callers.
func (m *Mapped) Advise(a Access) error {
	if m == nil || len(m.Data) == 0 {
		return nil
	}
	return advise(m.Data, a)
}

func advise(b []byte, a Access) error {
	adv := unix.MADV_NORMAL
	switch a {
	case AccessRandom:
		adv = unix.MADV_RANDOM
	case AccessSequential:
		adv = unix.MADV_SEQUENTIAL
	}
	return unix.Madvise(b, adv)
}
