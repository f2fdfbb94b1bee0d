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
	"github.com/energyscope/servingsnap/pkg/lake/parquetdir"
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
	var ps problems
	if !ps.keyRules(raw) {
		return ps
	}
	ps.identityRules(m)
	ps.fileRules(m)
	tierRules(m, ps.bad)
	ps.buildRules(m)
	ps.statsRules(m)
	ps.lineageRules(m)
	ps.inputRules(m)
	ps.attributeRules(m)
	return ps
}

// problems gathers the rules a manifest breaks, in the order checked.
type problems []Problem

// bad records a broken rule at loc.
func (ps *problems) bad(loc, format string, a ...any) {
	*ps = append(*ps, Problem{loc, fmt.Sprintf(format, a...)})
}

// keyRules checks exact keys and no nulls in raw: Go's decoder would
// accept a damaged key silently. False when raw is not a JSON object.
func (ps *problems) keyRules(raw []byte) bool {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		ps.bad("", "manifest is not a JSON object: %v", err)
		return false
	}
	ps.keys("", "", top)
	schema := subObject(top, "schema")
	ps.keys("schema", "schema", schema)
	for _, part := range []string{"data", "index"} {
		for i, c := range subArray(schema, part) {
			ps.keys(fmt.Sprintf("schema.%s[%d]", part, i), "column", c)
		}
	}
	for i, f := range subArray(top, "files") {
		ps.keys(fmt.Sprintf("files[%d]", i), "file", f)
	}
	ps.keys("stats", "stats", subObject(top, "stats"))
	ps.keys("build", "build", subObject(top, "build"))
	lin := subObject(top, "lineage")
	ps.keys("lineage", "lineage", lin)
	for i, in := range subArray(lin, "inputs") {
		ps.keys(fmt.Sprintf("lineage.inputs[%d]", i), "lineage.inputs", in)
	}
	return true
}

// keys checks the object at loc holds every key of its kind, none null.
func (ps *problems) keys(loc, kind string, fields map[string]json.RawMessage) {
	for _, k := range manifestKeys[kind] {
		v, ok := fields[k]
		switch {
		case !ok:
			ps.bad(joinLoc(loc, k), "field %q is missing", k)
		case bytes.Equal(bytes.TrimSpace(v), []byte("null")):
			ps.bad(joinLoc(loc, k), "field %q is null", k)
		}
	}
}

// subObject is the object under key, nil when absent or not an object.
func subObject(fields map[string]json.RawMessage, key string) map[string]json.RawMessage {
	var o map[string]json.RawMessage
	if v, ok := fields[key]; ok {
		json.Unmarshal(v, &o)
	}
	return o
}

// subArray is the array of objects under key, nil when absent or not one.
func subArray(fields map[string]json.RawMessage, key string) []map[string]json.RawMessage {
	var a []map[string]json.RawMessage
	if v, ok := fields[key]; ok {
		json.Unmarshal(v, &a)
	}
	return a
}

// identityRules checks who wrote the manifest, and when (in UTC).
func (ps *problems) identityRules(m *manifest.Manifest) {
	if !strings.HasPrefix(m.Tool, "servingsnap ") {
		ps.bad("tool", "tool %q is not \"servingsnap <version>\"", m.Tool)
	}
	if !strings.HasSuffix(m.Created, "Z") {
		ps.bad("created", "created %q is not a UTC time", m.Created)
	}
}

// fileRules checks every file is in this snapshot's directory, with the
// tier and batch count its role allows.
func (ps *problems) fileRules(m *manifest.Manifest) {
	dir := dataset.SnapshotPath(m.SnapshotID) + "/"
	for i, f := range m.Files {
		loc := fmt.Sprintf("files[%d]", i)
		if !strings.HasPrefix(f.Path, dir) || strings.Contains(f.Path[len(dir):], "/") {
			ps.bad(loc+".path", "path %q is not a file of %s", f.Path, strings.TrimSuffix(dir, "/"))
		}
		if f.Role == manifest.RoleData && f.Tier != manifest.TierHot {
			ps.bad(loc+".tier", "data file tier %q, want %q", f.Tier, manifest.TierHot)
		}
		if (f.Role == manifest.RoleIndex || f.Role == manifest.RolePortable) && f.Tier != "" {
			ps.bad(loc+".tier", "%s file tier %q, want \"\"", f.Role, f.Tier)
		}
		if f.Role == manifest.RoleIndex && f.Batches != 1 {
			ps.bad(loc+".batches", "index file has %d batches, the format says exactly 1", f.Batches)
		}
		if f.Role == manifest.RoleCold {
			if f.Tier != manifest.TierCold {
				ps.bad(loc+".tier", "cold file tier %q, want %q", f.Tier, manifest.TierCold)
			}
			if (f.Rows > 0) != (f.Batches > 0) || int64(f.Batches) > f.Rows {
				ps.bad(loc+".batches", "cold file has %d chunks for %d rows (chunks are never empty)", f.Batches, f.Rows)
			}
		}
	}
}

// buildRules checks the build options, and that the data file's batch
// count fits batch_rows.
func (ps *problems) buildRules(m *manifest.Manifest) {
	b := m.Build
	if b.SeriesColumn == "" || b.PeriodColumn == "" || b.ValueColumn == "" ||
		b.SeriesColumn == b.PeriodColumn || b.SeriesColumn == b.ValueColumn || b.PeriodColumn == b.ValueColumn {
		ps.bad("build", "series, period and value columns must be distinct and non-empty (%q, %q, %q)", b.SeriesColumn, b.PeriodColumn, b.ValueColumn)
	}
	switch b.OnDuplicate {
	case "error", "last":
	default:
		ps.bad("build.on_duplicate", "on_duplicate %q, want \"error\" or \"last\"", b.OnDuplicate)
	}
	if b.BatchRows < 1 {
		ps.bad("build.batch_rows", "batch_rows %d is not positive", b.BatchRows)
	}
	if d, ok := m.FileByRole(manifest.RoleData); ok && b.BatchRows >= 1 {
		// Batches are filled greedily up to batch_rows, and a batch only
		// exceeds it when it holds one series, so there can be no more
		// batches than series and no fewer than rows/batch_rows.
		if int64(d.Batches) > m.Stats.Series || (d.Rows > 0 && d.Batches == 0) {
			ps.bad("files", "data file has %d batches for %d series", d.Batches, m.Stats.Series)
		}
	}
}

// statsRules checks the statistics agree with each other and with the
// duplicate policy, and the period bounds are dates in order.
func (ps *problems) statsRules(m *manifest.Manifest) {
	s := m.Stats
	if s.DuplicatesDropped < 0 {
		ps.bad("stats.duplicates_dropped", "duplicates_dropped %d is negative", s.DuplicatesDropped)
	}
	if m.Build.OnDuplicate == "error" && s.DuplicatesDropped != 0 {
		ps.bad("stats.duplicates_dropped", "%d duplicates dropped although on_duplicate is \"error\"", s.DuplicatesDropped)
	}
	if (s.Rows == 0) != (s.Series == 0) {
		ps.bad("stats", "%d rows in %d series", s.Rows, s.Series)
	}
	var first, last int64
	for _, p := range []struct {
		loc, val string
		dst      *int64
	}{{"stats.first_period", s.FirstPeriod, &first}, {"stats.last_period", s.LastPeriod, &last}} {
		switch {
		case s.Rows == 0 && p.val != "":
			ps.bad(p.loc, "%q in a snapshot without rows, want \"\"", p.val)
		case s.Rows > 0:
			d, ok := parseDate(p.val)
			if !ok {
				ps.bad(p.loc, "%q is not a YYYY-MM-DD date", p.val)
			}
			*p.dst = d
		}
	}
	if s.Rows > 0 && first > last {
		ps.bad("stats", "first_period %s is after last_period %s", s.FirstPeriod, s.LastPeriod)
	}
}

// isTable says the lineage is a Delta or Iceberg table's.
func isTable(l manifest.Lineage) bool {
	return l.Kind == manifest.KindDelta || l.Kind == manifest.KindIceberg
}

// lineageRules checks the lineage's kind and what each kind must name.
func (ps *problems) lineageRules(m *manifest.Manifest) {
	l := m.Lineage
	table := isTable(l)
	switch {
	case l.Kind == manifest.KindParquet, table:
	case l.Kind == "compaction":
		// the parent snapshot with live writes folded in: no input files,
		// and a WAL position (what it folded)
		if len(l.Inputs) > 0 {
			ps.bad("lineage.inputs", "a compaction lists %d input files, want none", len(l.Inputs))
		}
		if m.WALPosition == 0 {
			ps.bad("wal_position", "a compaction folded in no WAL position")
		}
	default:
		ps.bad("lineage.kind", "kind %q, want \"parquet\", \"delta\", \"iceberg\" or \"compaction\"", l.Kind)
	}
	if table && (l.LakeSnapshotID == "" || l.Location == "" || l.TableVersion == nil) {
		ps.bad("lineage", "a %s lineage names its lake_snapshot_id, location and table_version", l.Kind)
	}
	if l.SnapshotTimestamp != "" {
		if _, err := time.Parse(time.RFC3339Nano, l.SnapshotTimestamp); err != nil {
			ps.bad("lineage.snapshot_timestamp", "%q is not RFC 3339", l.SnapshotTimestamp)
		}
	}
}

// inputRules checks each input's path, size and checksum, and that the
// inputs' rows add up to the rows, duplicates and other shards' rows.
func (ps *problems) inputRules(m *manifest.Manifest) {
	l, s := m.Lineage, m.Stats
	table := isTable(l)
	var inRows int64
	for i, in := range l.Inputs {
		loc := fmt.Sprintf("lineage.inputs[%d]", i)
		switch {
		case table:
			// A table's data files are named as its log names them:
			// relative to the table root, or absolute locations; they are
			// listed in the table's order (not by path).
			if in.Path == "" {
				ps.bad(loc+".path", "empty path")
			}
		case in.Path == "" || strings.HasPrefix(in.Path, "/") || path.Clean(in.Path) != in.Path || strings.HasPrefix(in.Path, "../"):
			ps.bad(loc+".path", "path %q is not a clean relative path", in.Path)
		case !inputName(in.Path):
			ps.bad(loc+".path", "path %q is not a file the builder reads (a .parquet file, no component starting with . or _)", in.Path)
		case i > 0 && !parquetdir.NaturalLess(l.Inputs[i-1].Path, in.Path):
			ps.bad(loc+".path", "path %q does not follow %q: inputs are listed once each, in the builder's order", in.Path, l.Inputs[i-1].Path)
		}
		if in.Size < 0 || in.Rows < 0 {
			ps.bad(loc, "negative size or rows")
		}
		if !fileutil.ValidChecksum(in.Checksum) {
			ps.bad(loc+".checksum", "checksum %q is not %s<16 hex digits>", in.Checksum, fileutil.ChecksumPrefix)
		}
		inRows += in.Rows
	}
	var other int64 // a shard's inputs also hold the other shards' rows
	if m.Shard != nil {
		other = m.Shard.OtherShardRows
	}
	if l.Kind != "compaction" && inRows != s.Rows+s.DuplicatesDropped+other {
		ps.bad("lineage.inputs", "inputs hold %d rows, but stats say %d rows + %d duplicates dropped + %d of other shards", inRows, s.Rows, s.DuplicatesDropped, other)
	}
}

// attributeRules checks no attribute is listed twice.
func (ps *problems) attributeRules(m *manifest.Manifest) {
	attrs := map[string]bool{}
	for i, a := range m.Schema.Attributes {
		if attrs[a] {
			ps.bad(fmt.Sprintf("schema.attributes[%d]", i), "attribute %q listed twice", a)
		}
		attrs[a] = true
	}
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
	if tiered != m.Tiered() {
		bad("format_version", "format_version %d (tiered: %v) with tier policy hot_since %q hot_rows %d format %q: tiered snapshots (version %d, or version %d with a cold file), and only they, have one", m.FormatVersion, m.Tiered(), b.HotSince, b.HotRows, b.DataFormat, manifest.VersionTiered, manifest.Version)
	}
	if d, ok := m.FileByRole(manifest.RoleData); ok && b.DataFormat == coldfile.FormatVortex && (d.Rows != 0 || d.Batches != 0) {
		bad("files", "data file has %d rows in %d batches, but every row is cold (build.format %q)", d.Rows, d.Batches, b.DataFormat)
	}
}
