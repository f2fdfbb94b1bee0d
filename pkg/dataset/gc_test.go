package dataset_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// vintages builds n snapshots of a one-row dataset and returns its dir.
func vintages(t *testing.T, n int) string {
	t.Helper()
	lake, ds := t.TempDir(), filepath.Join(t.TempDir(), "DS")
	for i := 0; i < n; i++ {
		testlake.WriteParquet(t, lake, "a.parquet", 0,
			testlake.Col{Name: "series_id", Vals: testlake.Strs("S")},
			testlake.Col{Name: "period", Vals: testlake.Strs("2020")},
			testlake.Col{Name: "value", Vals: testlake.Floats(float64(i))})
		testsnap.Build(t, lake, ds, nil)
	}
	return ds
}

func lockFor(t *testing.T, ds string) (*dataset.Dir, *dataset.Writer) {
	t.Helper()
	d, err := dataset.Open(ds)
	if err != nil {
		t.Fatal(err)
	}
	w, err := d.LockForWrite()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return d, w
}

func TestRollbackAndHistory(t *testing.T) {
	ds := vintages(t, 3)
	d, w := lockFor(t, ds)
	from, err := w.Rollback(1, dataset.Change{Tool: "test", Reason: "bad nightly"})
	if err != nil || from != 3 {
		t.Fatalf("Rollback = %d, %v", from, err)
	}
	if id, _ := d.CurrentID(); id != 1 {
		t.Fatalf("CURRENT = %d after rollback", id)
	}
	if _, err := w.Rollback(9, dataset.Change{Tool: "test", Reason: ""}); err == nil {
		t.Fatal("rolled back to a vintage that does not exist")
	}
	flips, err := d.Flips()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range flips {
		got = append(got, f.Action+":"+dataset.FormatID(f.From)+">"+dataset.FormatID(f.To))
	}
	want := []string{"build:000000>000001", "build:000001>000002", "build:000002>000003", "rollback:000003>000001"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("flips = %v, want %v", got, want)
	}
	vs, err := d.Vintages()
	if err != nil || len(vs) != 3 || !vs[0].Current || vs[2].Current || vs[2].Parent != 2 {
		t.Fatalf("vintages = %+v, %v", vs, err)
	}
	// A torn last line (crash mid-append) is skipped, not fatal.
	f, _ := os.OpenFile(filepath.Join(ds, dataset.HistoryFile), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"time":"2026`)
	f.Close()
	if flips, err := d.Flips(); err != nil || len(flips) != 4 {
		t.Fatalf("after a torn line: %d flips, %v", len(flips), err)
	}
}

func TestGC(t *testing.T) {
	cases := []struct {
		name        string
		keep        int
		current     uint64 // rollback target first, 0 = leave at 5
		leased      uint64 // a reader holds this one open, 0 = none
		dry         bool
		wantRemoved []uint64
		wantInUse   []uint64
		wantLeft    []uint64
	}{
		// keep K is K vintages besides CURRENT (counting CURRENT, keep 1
		// would leave nothing to roll back to).
		{"keep 1 leaves one to roll back to", 1, 0, 0, false, []uint64{3, 2, 1}, nil, []uint64{4, 5}},
		{"keep 2", 2, 0, 0, false, []uint64{2, 1}, nil, []uint64{3, 4, 5}},
		{"keep 0 keeps CURRENT", 0, 0, 0, false, []uint64{4, 3, 2, 1}, nil, []uint64{5}},
		{"keep more than there are", 9, 0, 0, false, nil, nil, []uint64{1, 2, 3, 4, 5}},
		{"rolled-back CURRENT survives", 1, 2, 0, false, []uint64{4, 3, 1}, nil, []uint64{2, 5}},
		{"rolled-back CURRENT is not one of the K", 2, 2, 0, false, []uint64{3, 1}, nil, []uint64{2, 4, 5}},
		{"reader holds a lease", 1, 0, 3, false, []uint64{2, 1}, []uint64{3}, []uint64{3, 4, 5}},
		{"dry run removes nothing", 1, 0, 0, true, []uint64{3, 2, 1}, nil, []uint64{1, 2, 3, 4, 5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds := vintages(t, 5)
			if tc.leased != 0 {
				s, err := snapshot.OpenID(ds, tc.leased, snapshot.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
			}
			d, w := lockFor(t, ds)
			if tc.current != 0 {
				if _, err := w.Rollback(tc.current, dataset.Change{Tool: "test", Reason: ""}); err != nil {
					t.Fatal(err)
				}
			}
			res, err := w.GC(tc.keep, tc.dry)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Removed, tc.wantRemoved) || !slices.Equal(res.InUse, tc.wantInUse) {
				t.Fatalf("removed %v in use %v, want %v and %v", res.Removed, res.InUse, tc.wantRemoved, tc.wantInUse)
			}
			left, _ := d.IDs()
			if !reflect.DeepEqual(left, tc.wantLeft) {
				t.Fatalf("left %v, want %v", left, tc.wantLeft)
			}
			for _, id := range res.Removed {
				if _, err := os.Stat(filepath.Join(ds, dataset.SnapshotPath(id))); !tc.dry && !os.IsNotExist(err) {
					t.Errorf("snapshot %d files survived gc", id)
				}
			}
			if !tc.dry && len(res.Removed) > 0 && res.FreedBytes <= 0 {
				t.Errorf("freed %d bytes", res.FreedBytes)
			}
			// Whatever is left still opens.
			for _, id := range left {
				s, err := snapshot.OpenID(ds, id, snapshot.Options{VerifyData: true})
				if err != nil {
					t.Fatalf("vintage %d no longer opens: %v", id, err)
				}
				s.Close()
			}
		})
	}
}

// TestIDsNeverReused: after a rollback and a gc that removes the newest
// vintage, the next build must not get that id again (it would name
// different content than clients and HISTORY remember).
func TestIDsNeverReused(t *testing.T) {
	ds := vintages(t, 3)
	_, w := lockFor(t, ds)
	if _, err := w.Rollback(1, dataset.Change{Tool: "test", Reason: ""}); err != nil {
		t.Fatal(err)
	}
	res, err := w.GC(0, false)
	if err != nil || !reflect.DeepEqual(res.Removed, []uint64{3, 2}) {
		t.Fatalf("gc = %+v, %v", res, err)
	}
	id, err := w.NextID()
	if err != nil || id != 4 {
		t.Fatalf("NextID after collecting 2 and 3 = %d, %v; want 4", id, err)
	}
	if res, _ := w.GC(5, true); res.InUse == nil || res.Removed == nil {
		t.Fatal("empty GC lists must be [] in JSON, not null")
	}
}

// TestLockWait: a second writer says it waits, names who holds the lock,
// gives up after its timeout, and gets the lock once it is released.
func TestLockWait(t *testing.T) {
	d, err := dataset.Open(vintages(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	first, err := d.LockForWrite()
	if err != nil {
		t.Fatal(err)
	}
	var holders []int
	o := dataset.LockOptions{Timeout: 100 * time.Millisecond, Waiting: func(pid int) { holders = append(holders, pid) }}
	_, err = d.LockForWriteWith(context.Background(), o)
	if !errors.Is(err, fileutil.ErrLocked) || !slices.Equal(holders, []int{os.Getpid()}) {
		t.Fatalf("err %v, waiting called with %v; want ErrLocked after one call with this pid", err, holders)
	}
	for _, want := range []string{d.Name, fmt.Sprintf("process %d", os.Getpid()), "100ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	released := make(chan struct{})
	time.AfterFunc(50*time.Millisecond, func() { first.Close(); close(released) })
	holders = nil
	o.Timeout = 10 * time.Second
	w, err := d.LockForWriteWith(context.Background(), o)
	if err != nil || len(holders) != 1 {
		t.Fatalf("after the first writer released: %v (waiting called %d times)", err, len(holders))
	}
	<-released
	w.Close()
}

// TestMissingVintage: a rollback to a vintage that is not there names it
// and those that are, and is fs.ErrNotExist for the command's exit status.
func TestMissingVintage(t *testing.T) {
	_, w := lockFor(t, vintages(t, 3))
	_, err := w.Rollback(9, dataset.Change{Tool: "test", Reason: ""})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "snapshot 9 of DS does not exist (vintages: 1, 2, 3; CURRENT is 3)") {
		t.Fatalf("rollback to 9: %v", err)
	}
}

// TestSnapshotDirReadable: a published snapshot directory is readable by
// others (a server running as another user), not MkdirTemp's 0700.
func TestSnapshotDirReadable(t *testing.T) {
	ds := vintages(t, 1)
	st, err := os.Stat(filepath.Join(ds, dataset.SnapshotPath(1)))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o005 != 0o005 {
		t.Errorf("snapshot directory mode %v: others cannot read it", st.Mode().Perm())
	}
}
