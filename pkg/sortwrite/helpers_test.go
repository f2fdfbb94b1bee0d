package sortwrite

import (
	"context"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/pkg/arrowfile"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/progress"
)

// build runs Build with test defaults.
func build(t testing.TB, in, out string, mod func(*Options)) (*Summary, error) {
	t.Helper()
	opt := Options{Input: in, Out: out, Parallel: 2}
	if mod != nil {
		mod(&opt)
	}
	return Build(context.Background(), opt)
}

// snapshotRows reads a published snapshot back: per series id, its
// (period, value) rows in file order, and the index.
type seriesRow struct {
	Period int32
	Value  any
}

func readBack(t testing.TB, dsDir string) (*manifest.Manifest, map[string][]seriesRow, arrow.RecordBatch) {
	t.Helper()
	ds, err := dataset.Open(dsDir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ds.Current()
	if err != nil {
		t.Fatal(err)
	}
	df, _ := m.FileByRole(manifest.RoleData)
	xf, _ := m.FileByRole(manifest.RoleIndex)
	xm, err := arrowfile.Load(ds.Path(xf.Path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { xm.Close() })
	xrec, err := xm.Batch(0)
	if err != nil {
		t.Fatal(err)
	}
	x, err := index.New(xrec)
	if err != nil {
		t.Fatal(err)
	}
	dm, err := arrowfile.Map(ds.Path(df.Path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dm.Close() })
	out := map[string][]seriesRow{}
	for b := 0; b < dm.Reader.NumRecords(); b++ {
		rec, err := dm.Batch(b)
		if err != nil {
			t.Fatal(err)
		}
		codes := rec.Column(0).(*array.Uint32).Uint32Values()
		periods := rec.Column(1).(*array.Date32).Date32Values()
		vals := rec.Column(2)
		for i := range codes {
			id := x.SeriesID(int(codes[i]))
			var v any
			if vals.IsValid(i) {
				v = vals.GetOneForMarshal(i)
			}
			out[id] = append(out[id], seriesRow{int32(periods[i]), v})
		}
		rec.Release()
	}
	return m, out, xrec
}

// phaseLog is a progress.Reporter that records which phases began and
// which of them ended as done.
type phaseLog struct {
	mu     sync.Mutex
	phases []*loggedPhase
}

type loggedPhase struct {
	log  *phaseLog
	name string
	done bool
}

func (l *phaseLog) Phase(name string, _, _ int64) progress.Phase {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := &loggedPhase{log: l, name: name}
	l.phases = append(l.phases, p)
	return p
}

func (p *loggedPhase) Add(int64, int64) {}

func (p *loggedPhase) Done() {
	p.log.mu.Lock()
	p.done = true
	p.log.mu.Unlock()
}

// open lists the phases that began but did not end as done.
func (l *phaseLog) open() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var open []string
	for _, p := range l.phases {
		if !p.done {
			open = append(open, p.name)
		}
	}
	return open
}
