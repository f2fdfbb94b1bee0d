// Package manifestcheck holds the rules docs/FORMAT.md §2 sets for a
// manifest that manifest.Validate does not enforce (exact field names, file
// paths inside the snapshot's directory, tiers, build options, statistics
// formats, lineage). snapverify reports a broken rule as a finding; the
// read side keeps accepting such manifests, because nothing it needs to
// serve depends on them.
//
// Why a package apart from pkg/verify: the rules depend only on the
// manifest, and the fuzz target FuzzParseManifest (which also exercises
// manifest.Parse, Marshal and ParseCurrent) needs a small test binary —
// coverage-guided fuzzing stalls in one that links Arrow and Parquet.
// The rules are candidates for manifest.Validate itself.
package manifestcheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/energyscope/servingsnap/pkg/coldfile"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/lake"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// manifestKeys are the fields every format-version-1 manifest has, as
// sortwrite writes them. The list is fixed for version 1 on purpose: a
// later minor version may add fields, and version-1 manifests written
// before it must still pass.
var manifestKeys = map[string][]string{
	"":               {"format", "format_version", "snapshot_id", "parent_id", "dataset", "created", "tool", "schema", "files", "stats", "build", "lineage", "wal_position"},
	"schema":         {"data", "index", "attributes"},
	"column":         {"name", "type", "nullable"},
	"file":           {"path", "role", "tier", "format", "size", "rows", "batches", "checksum"},
	"stats":          {"rows", "series", "first_period", "last_period", "duplicates_dropped"},
	"build":          {"series_column", "period_column", "value_column", "on_duplicate", "batch_rows"},
	"lineage":        {"kind", "source", "lake_snapshot_id", "inputs"},
	"lineage.inputs": {"path", "size", "rows", "checksum"},
}

// Problem is one rule a manifest breaks: where (a JSON path such as
// "files[1].tier") and what.
type Problem struct {
	Location string
	Message  string
}

// Problems lists the rules broken by manifest m, parsed (by manifest.Parse)
// from raw: every field present under its exact name and not null (Go's
// JSON decoder matches keys case-insensitively and leaves absent fields
// zero, so a damaged key would otherwise go unnoticed), file paths inside
// this snapshot's directory, tiers, build options, statistics formats, the
// lineage's inputs, and the row arithmetic between inputs, duplicates and
// rows. It never panics, whatever raw and m hold.
func Problems(raw []byte, m *manifest.Manifest) []Problem {
	var ps []Problem
	bad := func(loc, format string, a ...any) { ps = append(ps, Problem{loc, fmt.Sprintf(format, a...)}) }

	// Exact keys, no nulls.
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		bad("", "manifest is not a JSON object: %v", err)
		return ps
	}
	obj := func(loc, kind string, fields map[string]json.RawMessage) {
		for _, k := range manifestKeys[kind] {
			v, ok := fields[k]
			switch {
			case !ok:
				bad(joinLoc(loc, k), "field %q is missing", k)
			case bytes.Equal(bytes.TrimSpace(v), []byte("null")):
				bad(joinLoc(loc, k), "field %q is null", k)
			}
		}
	}
	sub := func(fields map[string]json.RawMessage, key string) map[string]json.RawMessage {
		var o map[string]json.RawMessage
		if v, ok := fields[key]; ok {
			json.Unmarshal(v, &o)
		}
		return o
	}
	arr := func(fields map[string]json.RawMessage, key string) []map[string]json.RawMessage {
		var a []map[string]json.RawMessage
		if v, ok := fields[key]; ok {
			json.Unmarshal(v, &a)
		}
		return a
	}
	obj("", "", top)
	schema := sub(top, "schema")
	obj("schema", "schema", schema)
	for _, part := range []string{"data", "index"} {
		for i, c := range arr(schema, part) {
			obj(fmt.Sprintf("schema.%s[%d]", part, i), "column", c)
		}
	}
	for i, f := range arr(top, "files") {
		obj(fmt.Sprintf("files[%d]", i), "file", f)
	}
	obj("stats", "stats", sub(top, "stats"))
	obj("build", "build", sub(top, "build"))
	lin := sub(top, "lineage")
	obj("lineage", "lineage", lin)
	for i, in := range arr(lin, "inputs") {
		obj(fmt.Sprintf("lineage.inputs[%d]", i), "lineage.inputs", in)
	}

	// Values.
	if !strings.HasPrefix(m.Tool, "servingsnap ") {
		bad("tool", "tool %q is not \"servingsnap <version>\"", m.Tool)
	}
	if !strings.HasSuffix(m.Created, "Z") {
		bad("created", "created %q is not a UTC time", m.Created)
	}
	dir := dataset.SnapshotPath(m.SnapshotID) + "/"
	for i, f := range m.Files {
		loc := fmt.Sprintf("files[%d]", i)
		if !strings.HasPrefix(f.Path, dir) || strings.Contains(f.Path[len(dir):], "/") {
			bad(loc+".path", "path %q is not a file of %s", f.Path, strings.TrimSuffix(dir, "/"))
		}
		if f.Role == manifest.RoleData && f.Tier != manifest.TierHot {
			bad(loc+".tier", "data file tier %q, want %q", f.Tier, manifest.TierHot)
		}
		if (f.Role == manifest.RoleIndex || f.Role == manifest.RolePortable) && f.Tier != "" {
			bad(loc+".tier", "%s file tier %q, want \"\"", f.Role, f.Tier)
		}
		if f.Role == manifest.RoleIndex && f.Batches != 1 {
			bad(loc+".batches", "index file has %d batches, the format says exactly 1", f.Batches)
		}
		if f.Role == manifest.RoleCold {
			if f.Tier != manifest.TierCold {
				bad(loc+".tier", "cold file tier %q, want %q", f.Tier, manifest.TierCold)
			}
			if (f.Rows > 0) != (f.Batches > 0) || int64(f.Batches) > f.Rows {
				bad(loc+".batches", "cold file has %d chunks for %d rows (chunks are never empty)", f.Batches, f.Rows)
			}
		}
	}
	tierRules(m, bad)
	b := m.Build
	if b.SeriesColumn == "" || b.PeriodColumn == "" || b.ValueColumn == "" ||
		b.SeriesColumn == b.PeriodColumn || b.SeriesColumn == b.ValueColumn || b.PeriodColumn == b.ValueColumn {
		bad("build", "series, period and value columns must be distinct and non-empty (%q, %q, %q)", b.SeriesColumn, b.PeriodColumn, b.ValueColumn)
	}
	switch b.OnDuplicate {
	case "error", "last":
	default:
		bad("build.on_duplicate", "on_duplicate %q, want \"error\" or \"last\"", b.OnDuplicate)
	}
	if b.BatchRows < 1 {
		bad("build.batch_rows", "batch_rows %d is not positive", b.BatchRows)
	}
	if d, ok := m.FileByRole(manifest.RoleData); ok && b.BatchRows >= 1 {
		// Batches are filled greedily up to batch_rows, and a batch only
		// exceeds it when it holds one series, so there can be no more
		// batches than series and no fewer than rows/batch_rows.
		if int64(d.Batches) > m.Stats.Series || (d.Rows > 0 && d.Batches == 0) {
			bad("files", "data file has %d batches for %d series", d.Batches, m.Stats.Series)
		}
	}
	s := m.Stats
	if s.DuplicatesDropped < 0 {
		bad("stats.duplicates_dropped", "duplicates_dropped %d is negative", s.DuplicatesDropped)
	}
	if b.OnDuplicate == "error" && s.DuplicatesDropped != 0 {
		bad("stats.duplicates_dropped", "%d duplicates dropped although on_duplicate is \"error\"", s.DuplicatesDropped)
	}
	if (s.Rows == 0) != (s.Series == 0) {
		bad("stats", "%d rows in %d series", s.Rows, s.Series)
	}
	var first, last int64
	for _, p := range []struct {
		loc, val string
		dst      *int64
	}{{"stats.first_period", s.FirstPeriod, &first}, {"stats.last_period", s.LastPeriod, &last}} {
		switch {
		case s.Rows == 0 && p.val != "":
			bad(p.loc, "%q in a snapshot without rows, want \"\"", p.val)
		case s.Rows > 0:
			d, ok := parseDate(p.val)
			if !ok {
				bad(p.loc, "%q is not a YYYY-MM-DD date", p.val)
			}
			*p.dst = d
		}
	}
	if s.Rows > 0 && first > last {
		bad("stats", "first_period %s is after last_period %s", s.FirstPeriod, s.LastPeriod)
	}
	l := m.Lineage
	table := l.Kind == manifest.KindDelta || l.Kind == manifest.KindIceberg
	switch {
	case l.Kind == manifest.KindParquet, table:
	case l.Kind == "compaction":
		// the parent snapshot with live writes folded in: no input files,
		// and a WAL position (what it folded)
		if len(l.Inputs) > 0 {
			bad("lineage.inputs", "a compaction lists %d input files, want none", len(l.Inputs))
		}
		if m.WALPosition == 0 {
			bad("wal_position", "a compaction folded in no WAL position")
		}
	default:
		bad("lineage.kind", "kind %q, want \"parquet\", \"delta\", \"iceberg\" or \"compaction\"", l.Kind)
	}
	if table && (l.LakeSnapshotID == "" || l.Location == "" || l.TableVersion == nil) {
		bad("lineage", "a %s lineage names its lake_snapshot_id, location and table_version", l.Kind)
	}
	if l.SnapshotTimestamp != "" {
		if _, err := time.Parse(time.RFC3339Nano, l.SnapshotTimestamp); err != nil {
			bad("lineage.snapshot_timestamp", "%q is not RFC 3339", l.SnapshotTimestamp)
		}
	}
	var inRows int64
	for i, in := range l.Inputs {
		loc := fmt.Sprintf("lineage.inputs[%d]", i)
		switch {
		case table:
			// A table's data files are named as its log names them:
			// relative to the table root, or absolute locations; they are
			// listed in the table's order (not by path).
			if in.Path == "" {
				bad(loc+".path", "empty path")
			}
		case in.Path == "" || strings.HasPrefix(in.Path, "/") || path.Clean(in.Path) != in.Path || strings.HasPrefix(in.Path, "../"):
			bad(loc+".path", "path %q is not a clean relative path", in.Path)
		case !inputName(in.Path):
			bad(loc+".path", "path %q is not a file the builder reads (a .parquet file, no component starting with . or _)", in.Path)
		case i > 0 && !lake.NaturalLess(l.Inputs[i-1].Path, in.Path):
			bad(loc+".path", "path %q does not follow %q: inputs are listed once each, in the builder's order", in.Path, l.Inputs[i-1].Path)
		}
		if in.Size < 0 || in.Rows < 0 {
			bad(loc, "negative size or rows")
		}
		if !fileutil.ValidChecksum(in.Checksum) {
			bad(loc+".checksum", "checksum %q is not %s<16 hex digits>", in.Checksum, fileutil.ChecksumPrefix)
		}
		inRows += in.Rows
	}
	var other int64 // a shard's inputs also hold the other shards' rows
	if m.Shard != nil {
		other = m.Shard.OtherShardRows
	}
	if l.Kind != "compaction" && inRows != s.Rows+s.DuplicatesDropped+other {
		bad("lineage.inputs", "inputs hold %d rows, but stats say %d rows + %d duplicates dropped + %d of other shards", inRows, s.Rows, s.DuplicatesDropped, other)
	}
	attrs := map[string]bool{}
	for i, a := range m.Schema.Attributes {
		if attrs[a] {
			bad(fmt.Sprintf("schema.attributes[%d]", i), "attribute %q listed twice", a)
		}
		attrs[a] = true
	}
	return ps
}

func joinLoc(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// parseDate accepts what period.Format writes: YYYY-MM-DD, with a longer
// year (no leading zero) or a leading '-' for dates outside years
// 1-9999, which date32 can hold. It returns the Unix day.
func parseDate(s string) (int64, bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	ys, rest, ok := strings.Cut(s, "-")
	if !ok || len(ys) < 4 || len(ys) > 4 && ys[0] == '0' || len(rest) != 5 || rest[2] != '-' {
		return 0, false
	}
	digits := func(t string) (int, bool) {
		if strings.TrimLeft(t, "0123456789") != "" {
			return 0, false
		}
		n, err := strconv.Atoi(t)
		return n, err == nil
	}
	y, ok1 := digits(ys)
	mo, ok2 := digits(rest[:2])
	d, ok3 := digits(rest[3:])
	if !ok1 || !ok2 || !ok3 || y > 1<<22 {
		return 0, false
	}
	if neg {
		y = -y
	}
	t := time.Date(y, time.Month(mo), d, 0, 0, 0, 0, time.UTC)
	if t.Year() != y || int(t.Month()) != mo || t.Day() != d {
		return 0, false
	}
	return t.Unix() / 86400, true
}

// inputName reports whether a lineage input path names a file the builder
// would read: a ".parquet" file (any case) with no hidden ("." or "_")
// component.
func inputName(p string) bool {
	if !strings.HasSuffix(strings.ToLower(p), ".parquet") {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if strings.HasPrefix(c, ".") || strings.HasPrefix(c, "_") {
			return false
		}
	}
	return true
}

// tierRules checks the tier policy in build (hot_since, hot_rows, format,
// docs/FORMAT.md §2, §9) against the snapshot's layout: a policy that
// moves rows to the cold tier exactly when the manifest is version 3 (the
// builder writes one from the other), and no hot row when every row is
// cold.
func tierRules(m *manifest.Manifest, bad func(loc, format string, a ...any)) {
	b := m.Build
	tiered := b.HotSince != "" || b.HotRows > 0 || b.DataFormat == coldfile.FormatVortex
	switch b.DataFormat {
	case "", "arrow", coldfile.FormatVortex:
	default:
		bad("build.format", "format %q, want \"arrow\" or %q", b.DataFormat, coldfile.FormatVortex)
	}
	if b.HotRows < 0 {
		bad("build.hot_rows", "hot_rows %d is negative", b.HotRows)
	}
	if _, ok := parseDate(b.HotSince); b.HotSince != "" && !ok {
		bad("build.hot_since", "hot_since %q is not a YYYY-MM-DD date", b.HotSince)
	}
	if b.DataFormat == coldfile.FormatVortex && (b.HotSince != "" || b.HotRows != 0) {
		bad("build", "format %q (every row cold) with a hot window (hot_since %q, hot_rows %d)", b.DataFormat, b.HotSince, b.HotRows)
	}
	if tiered != (m.FormatVersion == manifest.VersionTiered) {
		bad("format_version", "format_version %d with tier policy hot_since %q hot_rows %d format %q: version %d snapshots, and only they, have one", m.FormatVersion, b.HotSince, b.HotRows, b.DataFormat, manifest.VersionTiered)
	}
	if d, ok := m.FileByRole(manifest.RoleData); ok && b.DataFormat == coldfile.FormatVortex && (d.Rows != 0 || d.Batches != 0) {
		bad("files", "data file has %d rows in %d batches, but every row is cold (build.format %q)", d.Rows, d.Batches, b.DataFormat)
	}
}
