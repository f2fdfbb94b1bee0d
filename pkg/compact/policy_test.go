package compact

import (
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// TestTierPolicy: a compaction applies a tiered parent's recorded policy
// again, keeps an untiered parent untiered whatever its build section
// says, and refuses a tiered parent whose policy it cannot read.
func TestTierPolicy(t *testing.T) {
	cold := []manifest.File{{Path: "snapshots/000001/cold.vortex", Role: manifest.RoleCold}}
	cases := []struct {
		name    string
		files   []manifest.File
		build   manifest.Build
		want    coldfile.Policy
		wantErr string
	}{
		{"untiered", nil, manifest.Build{}, coldfile.Policy{}, ""},
		{"untiered, stray fields", nil, manifest.Build{HotRows: 5}, coldfile.Policy{}, ""},
		{"hot since", cold, manifest.Build{HotSince: "2023-01-01"}, coldfile.Policy{HotSince: 19358, HasHotSince: true}, ""},
		{"hot rows", cold, manifest.Build{HotRows: 12}, coldfile.Policy{HotRows: 12}, ""},
		{"both", cold, manifest.Build{HotSince: "2024-01-01", HotRows: 3}, coldfile.Policy{HotSince: 19723, HasHotSince: true, HotRows: 3}, ""},
		{"vortex", cold, manifest.Build{DataFormat: "vortex"}, coldfile.Policy{AllCold: true}, ""},
		{"tiered without a policy", cold, manifest.Build{}, coldfile.Policy{}, "records no tier policy"},
		{"bad date", cold, manifest.Build{HotSince: "2023-13-01"}, coldfile.Policy{}, "hot-since"},
		{"bad format", cold, manifest.Build{DataFormat: "orc"}, coldfile.Policy{}, "data format"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &manifest.Manifest{SnapshotID: 7, Files: tc.files, Build: tc.build}
			got, err := tierPolicy(m)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "snapshot 7") {
					t.Fatalf("error %v, want one naming snapshot 7 and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("policy %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
