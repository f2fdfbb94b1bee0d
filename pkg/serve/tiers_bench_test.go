package serve

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// BenchmarkTieredDoGet: one series per DoGet (Go Flight client, loopback,
// in-process server), 20k series × 150 monthly rows built all hot (HOT),
// with the last 15 rows of each hot (TIER: a 10% hot window) and every
// row cold (VORTEX); recent-only asks for the last 12 months (hot rows
// only in TIER), full history for all 150. The cold cache is 256 MiB
// (everything fits after the first pass, which the warm-up makes) or off
// ("nocache": every cold read decodes).
//
//	go test -run '^$' -bench TieredDoGet -benchtime 2000x ./pkg/serve/
func BenchmarkTieredDoGet(b *testing.B) {
	const series, rows = 20_000, 150
	dir := b.TempDir()
	lake := filepath.Join(dir, "lake")
	testlake.WriteUniform(b, lake, series, rows)
	root := filepath.Join(dir, "root")
	pol := map[string]coldfile.Policy{"HOT": {}, "TIER": {HotRows: 15}, "VORTEX": {AllCold: true}}
	for name, p := range pol {
		if _, err := sortwrite.Build(context.Background(), sortwrite.Options{Input: lake, Out: filepath.Join(root, name), Parallel: runtime.GOMAXPROCS(0), Tiers: p}); err != nil {
			b.Fatal(err)
		}
	}
	os.RemoveAll(lake)
	ids := testlake.UniformIDs(series)
	recent := `"start":"` + time.Unix(int64(day(b, "2000-01-01")+int32((rows-12)*31))*86400, 0).UTC().Format(time.DateOnly) + `",`
	for _, cache := range []struct {
		name  string
		bytes int64
	}{{"cache", 256 << 20}, {"nocache", 0}} {
		srv := startServer(b, Config{Root: root, Options: Options{ColdCacheBytes: cache.bytes}})
		c := dial(b, srv)
		ctx := context.Background()
		for _, ds := range []string{"HOT", "TIER", "VORTEX"} {
			for _, q := range []struct{ name, extra string }{{"recent", recent}, {"full", ""}} {
				if cache.name == "nocache" && ds == "HOT" {
					continue // the cache plays no part
				}
				b.Run(ds+"/"+q.name+"/"+cache.name, func(b *testing.B) {
					tk := func(i int) []byte {
						return []byte(`{"dataset":"` + ds + `",` + q.extra + `"series":["` + ids[i%len(ids)] + `"]}`)
					}
					for i := 0; i < 2000; i++ { // warm the connection (and the cache)
						doGetRows(ctx, c, tk(i))
					}
					lat := make([]time.Duration, 0, 1<<14)
					i := 0
					for b.Loop() {
						t0 := time.Now()
						n, err := doGetRows(ctx, c, tk(i))
						lat = append(lat, time.Since(t0))
						if err != nil || n == 0 {
							b.Fatalf("%d rows, %v", n, err)
						}
						i++
					}
					percentiles(b, lat)
				})
			}
		}
	}
}
