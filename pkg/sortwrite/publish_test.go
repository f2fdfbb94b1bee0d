package sortwrite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/pkg/dataset"
)

// writeSeries writes a lake of n series with one row each (n may be 0).
func writeSeries(t *testing.T, dir string, n int) {
	t.Helper()
	ids, ps, vs := []any{}, []any{}, []any{}
	for i := 0; i < n; i++ {
		ids, ps, vs = append(ids, fmt.Sprintf("S%03d", i)), append(ps, "2020"), append(vs, float64(i))
	}
	testlake.WriteParquet(t, dir, "a.parquet", 0,
		testlake.Col{Name: "series_id", Vals: ids, Typ: utf8},
		testlake.Col{Name: "period", Vals: ps, Typ: utf8},
		testlake.Col{Name: "value", Vals: vs, Typ: f64})
}

func currentID(t *testing.T, out string) uint64 {
	t.Helper()
	ds, err := dataset.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	id, err := ds.CurrentID()
	if errors.Is(err, dataset.ErrNoCurrent) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestPublishSafety: an empty input and an implausible change are refused
// (and publish nothing) unless the override says so.
func TestPublishSafety(t *testing.T) {
	cases := []struct {
		name      string
		first     int // series of the snapshot already CURRENT (-1: none)
		next      int // series of the input built now
		opt       func(*Options)
		wantErr   error
		wantParts []string
	}{
		{"empty input refused", -1, 0, nil, ErrEmpty, []string{"holds no rows", "--allow-empty"}},
		{"empty input over a snapshot refused", 10, 0, nil, ErrEmpty, []string{"--allow-empty"}},
		{"empty input allowed", -1, 0, func(o *Options) { o.AllowEmpty = true }, nil, nil},
		{"empty allowed over a snapshot, whatever max-change", 10, 0, func(o *Options) { o.AllowEmpty = true; o.MaxChange = 0.5 }, nil, nil},
		{"halving allowed", 10, 5, func(o *Options) { o.MaxChange = 0.5 }, nil, nil},
		{"below half refused", 10, 4, func(o *Options) { o.MaxChange = 0.5 }, ErrImplausible, []string{"4 series", "has 10", "-60%", "--max-change 0.5", "5 to 20", "--max-change 0"}},
		{"doubling allowed", 10, 20, func(o *Options) { o.MaxChange = 0.5 }, nil, nil},
		{"beyond double refused", 10, 21, func(o *Options) { o.MaxChange = 0.5 }, ErrImplausible, []string{"21 series", "+110%"}},
		{"tight ratio", 10, 8, func(o *Options) { o.MaxChange = 0.1 }, ErrImplausible, []string{"8 series", "9 to 11"}},
		{"0 disables", 10, 1, func(o *Options) { o.MaxChange = 0 }, nil, nil},
		{"first snapshot has nothing to compare with", -1, 1, func(o *Options) { o.MaxChange = 0.5 }, nil, nil},
		{"ratio out of range", -1, 1, func(o *Options) { o.MaxChange = 1 }, nil, []string{"max-change 1", "[0, 1)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "DS")
			var before uint64
			if tc.first >= 0 {
				in := t.TempDir()
				writeSeries(t, in, tc.first)
				if _, err := build(t, in, out, nil); err != nil {
					t.Fatal(err)
				}
				before = currentID(t, out)
			}
			in := t.TempDir()
			writeSeries(t, in, tc.next)
			sum, err := build(t, in, out, tc.opt)
			if tc.wantErr == nil && tc.wantParts == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := currentID(t, out); got != sum.SnapshotID || !sum.Published {
					t.Fatalf("CURRENT = %d, published %v; want %d", got, sum.Published, sum.SnapshotID)
				}
				return
			}
			if err == nil {
				t.Fatal("build succeeded")
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v is not %v", err, tc.wantErr)
			}
			for _, w := range tc.wantParts {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if got := currentID(t, out); got != before {
				t.Errorf("CURRENT moved from %d to %d", before, got)
			}
		})
	}
}

// TestNoPublish: --no-publish installs a complete vintage that CURRENT
// does not name, and the dataset can publish it later.
func TestNoPublish(t *testing.T) {
	out := filepath.Join(t.TempDir(), "DS")
	in := t.TempDir()
	writeSeries(t, in, 3)
	first, err := build(t, in, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	in2 := t.TempDir()
	writeSeries(t, in2, 4)
	sum, err := build(t, in2, out, func(o *Options) { o.NoPublish = true })
	if err != nil {
		t.Fatal(err)
	}
	if sum.Published || sum.ParentID != first.SnapshotID || sum.SnapshotID != first.SnapshotID+1 {
		t.Fatalf("summary: published %v, id %d, parent %d", sum.Published, sum.SnapshotID, sum.ParentID)
	}
	if got := currentID(t, out); got != first.SnapshotID {
		t.Fatalf("CURRENT = %d after --no-publish, want %d", got, first.SnapshotID)
	}
	ds, _ := dataset.Open(out)
	m, err := ds.Load(sum.SnapshotID)
	if err != nil {
		t.Fatalf("the staged snapshot's manifest: %v", err)
	}
	for _, f := range m.Files {
		if _, err := os.Stat(ds.Path(f.Path)); err != nil {
			t.Errorf("staged file: %v", err)
		}
	}
	// A writer that comes next (another build, gc) keeps it.
	w, err := ds.LockForWrite()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ds.Path(dataset.SnapshotPath(sum.SnapshotID))); err != nil {
		t.Fatalf("the next writer removed the staged snapshot: %v", err)
	}
	from, err := w.PublishInstalled(sum.SnapshotID, dataset.Change{Tool: "test"})
	w.Close()
	if err != nil || from != first.SnapshotID {
		t.Fatalf("PublishInstalled: from %d, %v", from, err)
	}
	if got := currentID(t, out); got != sum.SnapshotID {
		t.Fatalf("CURRENT = %d after publish, want %d", got, sum.SnapshotID)
	}
	flips, err := ds.Flips()
	if err != nil {
		t.Fatal(err)
	}
	if last := flips[len(flips)-1]; last.Action != dataset.ActionPublish || last.From != first.SnapshotID || last.To != sum.SnapshotID {
		t.Fatalf("last HISTORY flip = %+v", last)
	}
}

// TestBuildInterrupted cancels the build as each phase begins: the build
// fails with ErrInterrupted wrapping the cause, CURRENT stays where it
// was, and nothing staged is left behind.
func TestBuildInterrupted(t *testing.T) {
	in := t.TempDir()
	writeSeries(t, in, 50)
	for _, ph := range []string{"scan", "read", "sort", "write", "publish"} {
		t.Run(ph, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "DS")
			if _, err := build(t, in, out, nil); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			cause := errors.New("received terminated")
			opt := Options{Input: in, Out: out, Parallel: 2, BatchRows: 5, onPhase: func(p string) {
				if p == ph {
					cancel(cause)
				}
			}}
			_, err := Build(ctx, opt)
			if !errors.Is(err, ErrInterrupted) || !errors.Is(err, cause) {
				t.Fatalf("err = %v, want ErrInterrupted wrapping the cause", err)
			}
			if !strings.Contains(err.Error(), "nothing published") {
				t.Errorf("error %q does not say nothing was published", err)
			}
			if got := currentID(t, out); got != 1 {
				t.Errorf("CURRENT = %d, want 1", got)
			}
			ents, _ := os.ReadDir(filepath.Join(out, dataset.TmpDir))
			snaps, _ := os.ReadDir(filepath.Join(out, dataset.SnapshotsDir))
			if len(ents) != 0 || len(snaps) != 1 {
				t.Errorf("left behind: %d staged, %d snapshots", len(ents), len(snaps))
			}
		})
	}
}
