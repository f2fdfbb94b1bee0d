package sortwrite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/lakegen"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// BenchmarkBuildTiers builds one generated lake (SERVINGSNAP_BENCH_SERIES
// series, default 20,000: about 3M rows, periods 2000..2024) plainly and
// with each tier policy, in memory, and reports the build time and the
// bytes on disk: data (hot) and cold MiB, and their sum as a percentage of
// the plain build's data file. --hot-since 2022-07-01 keeps about the last
// 10% of every series' periods hot (the 10% hot window).
//
//	go test -run '^$' -bench BenchmarkBuildTiers -benchtime 3x ./pkg/sortwrite
func BenchmarkBuildTiers(b *testing.B) {
	series := 20000
	if v := os.Getenv("SERVINGSNAP_BENCH_SERIES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		series = n
	}
	lake := filepath.Join(os.TempDir(), fmt.Sprintf("servingsnap-bench-lake-%d", series))
	if _, err := os.Stat(lake); err != nil {
		if _, err := lakegen.Generate(context.Background(), lakegen.Options{Out: lake, Series: series, Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
	var plainData int64
	for _, tc := range []struct {
		name             string
		hotSince, format string
		hotRows          int64
	}{
		{name: "plain"},
		{name: "hot-since-10pct", hotSince: "2022-07-01"},
		{name: "hot-rows-24", hotRows: 24},
		{name: "vortex", format: coldfile.FormatVortex},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p, err := coldfile.PolicyOf(tc.hotSince, tc.hotRows, tc.format)
			if err != nil {
				b.Fatal(err)
			}
			var sum *Summary
			for b.Loop() {
				out := filepath.Join(b.TempDir(), "DS")
				if sum, err = Build(context.Background(), Options{Input: lake, Out: out, Tiers: p}); err != nil {
					b.Fatal(err)
				}
				os.RemoveAll(out)
			}
			var data, cold int64
			for _, f := range sum.Files {
				switch f.Role {
				case manifest.RoleData:
					data = f.Size
				case manifest.RoleCold:
					cold = f.Size
				}
			}
			if tc.name == "plain" {
				plainData = data
			}
			b.ReportMetric(float64(sum.Rows), "rows")
			b.ReportMetric(float64(data)/(1<<20), "data-MiB")
			b.ReportMetric(float64(cold)/(1<<20), "cold-MiB")
			if plainData > 0 {
				b.ReportMetric(100*float64(data+cold)/float64(plainData), "on-disk-%-of-plain")
			}
		})
	}
}
