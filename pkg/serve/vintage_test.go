package serve

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/lakegen"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// TestVintages: a ticket's "vintage" and SQL's FOR VERSION AS OF read a
// retained vintage as it was published (here each vintage has a different
// number of series, so the answers tell them apart), opened on first use
// and kept in a cache of --vintages views whose leases keep gc away; gc'd
// or unknown vintages are NotFound, "vintage" with "snapshot" is
// InvalidArgument; ListFlights with {"vintages": true} lists every vintage
// with a ticket that reads it.
func TestVintages(t *testing.T) {
	dir := t.TempDir()
	ds := filepath.Join(dir, "root", "V")
	series := []int{20, 30, 40, 50}
	for i, n := range series {
		lake := filepath.Join(dir, "lake"+strconv.Itoa(i))
		if _, err := lakegen.Generate(context.Background(), lakegen.Options{Out: lake, Series: n, FromYear: 2023, ToYear: 2024, Seed: 5, RowGroupRows: 4096}); err != nil {
			t.Fatal(err)
		}
		testsnap.Build(t, lake, ds, func(o *sortwrite.Options) { o.MaxChange = 0 })
	}
	srv := startServer(t, Config{Root: filepath.Join(dir, "root"), Options: Options{Vintages: 2}})
	c := dial(t, srv)
	ctx := context.Background()
	count := func(q map[string]any) (int, uint64, error) {
		r, err := get(ctx, c, ticket(q))
		if err != nil {
			return 0, 0, err
		}
		id, _ := strconv.ParseUint(r.schema.Metadata().Values()[r.schema.Metadata().FindKey(MetaSnapshotID)], 10, 64)
		seen := map[string]bool{}
		for _, s := range r.ids {
			seen[s] = true
		}
		return len(seen), id, nil
	}
	for v := uint64(1); v <= 4; v++ {
		n, id, err := count(map[string]any{"dataset": "V", "prefix": "", "vintage": v})
		if err != nil || n != series[v-1] || id != v {
			t.Fatalf("vintage %d: %d series from snapshot %d, %v; want %d series", v, n, id, err, series[v-1])
		}
	}
	d := srv.svc.datasets["V"]
	if got := d.OpenVintages(); !slices.Equal(got, []uint64{2, 3}) {
		t.Errorf("open vintages %v, want the two most recent non-live ones [2 3]", got)
	}
	// gc cannot remove what the cache holds open.
	dd, _ := dataset.Open(ds)
	w, err := dd.LockForWrite()
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.GC(0, false)
	w.Close()
	slices.Sort(res.InUse)
	if err != nil || !slices.Equal(res.InUse, []uint64{2, 3}) || !slices.Equal(res.Removed, []uint64{1}) {
		t.Fatalf("gc with vintages 2 and 3 open: %+v %v", res, err)
	}
	for _, tc := range []struct {
		q    map[string]any
		code codes.Code
	}{
		{map[string]any{"dataset": "V", "prefix": "", "vintage": 1}, codes.NotFound},
		{map[string]any{"dataset": "V", "prefix": "", "vintage": 99}, codes.NotFound},
		{map[string]any{"dataset": "V", "prefix": "", "vintage": 2, "snapshot": 4}, codes.InvalidArgument},
		{map[string]any{"dataset": "V", "prefix": "", "vintage": 0}, codes.InvalidArgument},
	} {
		if _, err := get(ctx, c, ticket(tc.q)); status.Code(err) != tc.code {
			t.Errorf("%v: %v, want %v", tc.q, err, tc.code)
		}
	}
	// SQL.
	sc := dialSQL(t, srv.FlightAddr().String())
	info, err := sc.Execute(ctx, "SELECT * FROM V FOR VERSION AS OF 3")
	if err != nil {
		t.Fatal(err)
	}
	if r := sqlGet(t, ctx, sc, info); len(unique(r.ids)) != series[2] {
		t.Errorf("FOR VERSION AS OF 3: %d series, want %d", len(unique(r.ids)), series[2])
	}
	// ListFlights of the vintages.
	lf, err := c.ListFlights(ctx, &flight.Criteria{Expression: []byte(`{"vintages": true}`)})
	if err != nil {
		t.Fatal(err)
	}
	var listed []uint64
	for {
		fi, err := lf.Recv()
		if err != nil {
			break
		}
		var md struct {
			ID      uint64 `json:"snapshot_id"`
			Current bool   `json:"current"`
		}
		if err := json.Unmarshal(fi.AppMetadata, &md); err != nil {
			t.Fatal(err)
		}
		listed = append(listed, md.ID)
		n, id, err := count(mustJSON(t, fi.Endpoint[0].Ticket.Ticket))
		if err != nil || id != md.ID || n != series[md.ID-1] || fi.TotalRecords <= 0 || md.Current != (md.ID == 4) {
			t.Errorf("listed vintage %+v: ticket reads %d series of snapshot %d, %v", md, n, id, err)
		}
	}
	if !slices.Equal(listed, []uint64{2, 3, 4}) {
		t.Errorf("listed vintages %v, want [2 3 4]", listed)
	}
	bad, err := c.ListFlights(ctx, &flight.Criteria{Expression: []byte(`{"vintage": true}`)})
	if err == nil {
		_, err = bad.Recv()
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("list criteria with a typo: %v, want InvalidArgument", err)
	}
}

func unique(ids []string) map[string]bool {
	m := map[string]bool{}
	for _, s := range ids {
		m[s] = true
	}
	return m
}

func mustJSON(t *testing.T, b []byte) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
