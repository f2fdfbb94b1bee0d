// Package wal is the write-ahead log of a dataset's live-write delta: the
// durable record of every acknowledged write that no published snapshot has
// folded in yet (DESIGN.md invariant 6). Payloads are opaque bytes (the
// server writes Arrow IPC stream bytes); the byte layout is docs/FORMAT.md §6.
//
// # Durability contract
//
// Append returns only after its records are written and fsynced, so an
// acknowledged record survives a crash of the process or of the machine,
// as far as the disk honours fsync. Append returns the Position after its
// last record. A compaction records the position it folded in (as the
// manifest's wal_position, Position.Uint64), and after a restart Replay
// from that position applies exactly the writes the snapshot lacks;
// TruncateBefore then deletes what is folded in. A write that was not
// acknowledged may or may not survive a crash.
//
// # Group commit
//
// An fsync costs about as much for one small record as for many, and it is
// the cost every writer waits on. So one committer goroutine takes every
// request queued while the previous fsync ran and writes them as one batch:
// one write, one fsync, every caller in it woken. Under load, throughput
// grows with the number of concurrent writers while each waits for about
// two fsyncs at most (the one in progress, then its own); alone, a writer
// pays one fsync per Append, as it must. Batching needs no timer: it comes
// from the time an fsync takes.
//
// # Preallocated segments
//
// Each segment (format version 2) is created at its full size, zero filled
// by writing and synced, and renamed into place before any record goes in;
// records then overwrite zeros. So an Append's fdatasync flushes data
// only: no file size or block allocation goes through the file system's
// journal, which is most of what an appending fdatasync costs beyond the
// data. The zero fill is not on the path of an Append: the committer starts
// preparing the next segment in the background once the active one is
// half full, and the rotation is a rename and a directory fsync. Segments
// of version 1, which grew by appending, stay readable, and a version-1
// newest segment goes on growing until the next segment is due.
//
// # Torn tails and corruption
//
// The zeros after the last record of a preallocated segment are its clean
// end, in the newest segment and in older ones alike: a crash that left
// nothing of the last write is not reported.
//
// A crash can leave the newest segment's last write incomplete: a header or
// payload cut short, a checksum that fails, zeros where data should be,
// even intact records after a damaged one (the kernel persists a write's
// pages in any order). None of that was acknowledged, so Open removes it —
// zeroes it in a preallocated segment, cuts it off in a version-1 one —,
// reports what it removed (Truncated) and appends after the last intact
// record. Zeroing matters: an intact record of the torn write left behind
// the records appended next could later be taken for a write after them.
//
// Writes are serialised and each is fsynced before the next starts, and each
// write marks its first record. So damage followed by an intact record that
// starts a later write cannot be a torn tail: that damaged write had been
// synced, and was acknowledged. That, and damage anywhere in an older
// segment, is a *CorruptionError naming segment and offset; the log refuses
// to go on rather than drop acknowledged records silently. With
// Options.Quarantine, Open instead keeps a damaged newest segment aside
// under a new name (never deleted) and continues after its intact prefix.
//
// Damage inside the last write cannot be told from a torn write. If a disk
// corrupts the last synced write after the fact, Open cuts it as a torn
// tail — reported in Truncation. Only a synced last write that a disk
// loses whole, leaving zeros, reads as a clean end without a report.
//
// # Failure
//
// After a write or fsync error the log refuses every later append
// (ErrFailed): what reached the disk is unknown, and an fsync error may have
// dropped pages the kernel will not write again, so appending on would risk
// acknowledging records after a gap. Close and Open again: recovery cuts
// whatever the failed write left.
package wal
