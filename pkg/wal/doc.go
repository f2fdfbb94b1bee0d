// Package wal is the write-ahead log of a dataset's live-write delta: the
// durable record of every acknowledged write that no published snapshot has
// folded in yet (docs/ARCHITECTURE.md, invariant 6). Payloads are opaque
// bytes (the server writes Arrow IPC stream bytes); the byte layout is
// docs/FORMAT.md §6.
//
// # Durability contract
//
// Append returns only after its records are written and fsynced, so an
// acknowledged record survives a crash of the process or of the machine,
// as far as the disk honours fsync. Append returns the Position after its
// last record. A write that was not acknowledged may or may not survive a
// crash.
//
// # The checkpoint
//
// The log owns the record of what its records belong to: its checkpoint,
// the file CHECKPOINT (WriteCheckpoint, ReadCheckpoint; docs/FORMAT.md
// §6.4). Every record at or before its position is held by a vintage (a
// compaction folded it in) or was retired (a superseding build, a
// discard); the records after it are the live delta. After a restart,
// Replay from the checkpoint's position applies exactly those, whatever
// snapshot CURRENT names and whatever gc removed: the position is never
// derived from manifests (their wal_position records it for people and
// for upgrading a log written before checkpoints existed). TruncateBefore
// then deletes what is folded in.
//
// # Readers without the lock
//
// Only the process that holds the log's LOCK appends (Open takes it). A
// read-only replica follows the log with a Tail (OpenTail), which hands
// out each record once it is intact and reports ErrBehind when the writer
// has deleted the segments it needed; Scan and End read the log for
// inspection, and Held says whether a writer has it open. None of them
// changes a file.
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
// # Torn tails and corruption
//
// A crash can leave the newest segment's last write incomplete: a header or
// payload cut short, a checksum that fails, zeros where data should be,
// even intact records after a damaged one (the kernel persists a write's
// pages in any order). None of that was acknowledged, so Open cuts it off,
// reports what it cut (Truncated) and appends after the last intact record.
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
// tail — reported in Truncation, never silent.
//
// # Failure
//
// After a write or fsync error (a full disk, an I/O error) the log refuses
// appends (ErrFailed, wrapping the cause; Failing says so): what reached
// the disk after the last acknowledged record is unknown, and an fsync
// error may have dropped pages the kernel will not write again, so
// appending on in that file would risk acknowledging records after a gap.
// The committer then heals the log without a restart, retrying with a
// backoff (up to 5 s) while the cause lasts: it cuts the active segment
// back to its acknowledged end, syncs it and starts a new segment, where
// appends resume. Corruption found by a replay is not healed: Close and
// Open again (or quarantine).
package wal
