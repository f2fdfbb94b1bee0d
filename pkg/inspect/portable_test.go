package inspect

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/export"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// TestSummaryShowsPortable: the summary lists the portable copy with its
// role, format, size, rows and row groups, in text and JSON.
func TestSummaryShowsPortable(t *testing.T) {
	_, ds := testsnap.Sample(t, filepath.Join(t.TempDir(), "a"), "P", 20, 1, func(o *sortwrite.Options) {
		o.Extra = append(o.Extra, export.PortableStep(export.PortableOptions{}))
	})
	s, err := Summarize(ds, 0)
	if err != nil {
		t.Fatal(err)
	}
	var pf *manifest.File
	for i := range s.Files {
		if s.Files[i].Role == manifest.RolePortable {
			pf = &s.Files[i]
		}
	}
	if pf == nil || pf.Format != manifest.FormatParquet || pf.Size == 0 || pf.Batches < 1 {
		t.Fatalf("summary files %+v", s.Files)
	}
	var text, js bytes.Buffer
	if err := s.WriteText(&text, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"text": text.String(), "json": js.String()} {
		if !strings.Contains(out, "portable.parquet") || !strings.Contains(out, "parquet") {
			t.Errorf("%s summary does not show the portable copy:\n%s", name, out)
		}
	}
}
