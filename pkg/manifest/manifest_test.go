package manifest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/energyscope/servingsnap/pkg/corrupt"
)

func valid() *Manifest {
	sum := "xxh64:0123456789abcdef"
	return &Manifest{
		Format: Format, FormatVersion: Version, SnapshotID: 2, ParentID: 1,
		Dataset: "PET", Created: "2026-01-02T03:04:05.123456789Z", Tool: "test",
		Files: []File{
			{Path: "snapshots/000002/data.arrow", Role: RoleData, Tier: TierHot, Format: FormatArrowIPCFile, Size: 100, Rows: 10, Batches: 1, Checksum: sum},
			{Path: "snapshots/000002/index.arrow", Role: RoleIndex, Tier: TierHot, Format: FormatArrowIPCFile, Size: 50, Rows: 2, Batches: 1, Checksum: sum},
		},
		Stats: Stats{Rows: 10, Series: 2},
	}
}

// TestMarshalParse: what Marshal writes Parse accepts; damage to the bytes
// or a broken rule is ErrCorrupt (the one corrupt.ErrCorrupt).
func TestMarshalParse(t *testing.T) {
	b, err := Marshal(valid())
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse(b)
	if err != nil || m.SnapshotID != 2 || len(m.Files) != 2 {
		t.Fatalf("Parse(Marshal(m)) = %+v, %v", m, err)
	}
	for name, bad := range map[string][]byte{
		"edited after writing": bytes.Replace(b, []byte(`"tool": "test"`), []byte(`"tool": "tset"`), 1),
		"not JSON":             []byte("{"),
		"future version":       bytes.Replace(b, []byte(`"format_version": 1`), []byte(`"format_version": 2`), 1),
	} {
		if _, err := Parse(bad); !errors.Is(err, ErrCorrupt) || !corrupt.Is(err) {
			t.Errorf("%s: Parse = %v, want ErrCorrupt", name, err)
		}
	}
	m = valid()
	m.Files[0].Path = "../escape"
	if _, err := Marshal(m); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Marshal of an invalid manifest = %v, want ErrCorrupt", err)
	}
}
