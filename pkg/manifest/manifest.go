// Package manifest defines the JSON manifest document that names a
// snapshot's files: its fields, Marshal with the self-checksum, and Parse
// and Validate, the rules every reader relies on before opening a file the
// manifest names. See docs/FORMAT.md §2 for the contract.
//
// The manifest is the only mutable-looking thing in a dataset, and even it
// is written once: publishing a snapshot writes a new manifest and flips
// CURRENT to it. The directory around it (CURRENT, ids, the write lock,
// publish, history, leases, gc) is package dataset.
package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/fileutil"
)

// Format and Version identify the manifest document; readers refuse other
// versions rather than guess. Readers accept every version from MinVersion
// to MaxVersion. The document's fields are the same in all; the version
// says the snapshot's layout: version 1 snapshots have a version-1 index,
// version 2 (VersionV2) a version-2 index (mapped, no dictionaries,
// FORMAT.md §4), version 3 (VersionTiered) a cold file and a version-3
// index that locates each series' cold rows, version 4 (VersionV4) a
// version-4 index (low-cardinality string attributes as code columns),
// with or without a cold file (its index then locates the cold rows), and
// version 5 (Version) the same with a version-5 index (a lookup table
// over the ids). Writers write Version, so that a reader that predates
// it refuses a snapshot it cannot read.
const (
	Format        = "servingsnap.manifest"
	Version       = 5
	VersionV2     = 2
	VersionTiered = 3
	VersionV4     = 4
	MinVersion    = 1
	// MaxVersion is the newest version this build reads.
	MaxVersion = Version
)

// File roles, tiers and formats written in Manifest.Files.
const (
	RoleData  = "data"
	RoleIndex = "index"
	// RolePortable is the optional portable copy (portable.parquet): every
	// row with its series id and attributes, for engines that read Parquet
	// on their own. At most one; no reader of the snapshot needs it.
	RolePortable = "portable"
	// RoleCold is a tiered snapshot's cold file (cold.vortex): each
	// series' rows older than its hot window (FORMAT.md §9). Exactly one
	// in a version-3 snapshot, none in others.
	RoleCold = "cold"

	TierHot  = "hot"
	TierCold = "cold"

	FormatArrowIPCFile = "arrow-ipc-file"
	FormatParquet      = "parquet"
	FormatVortex       = "vortex"
)

// ErrCorrupt marks a manifest or pointer that parses badly or breaks the
// format's rules. It is corrupt.ErrCorrupt, the one sentinel every package
// marks damage with; test with errors.Is.
var ErrCorrupt = corrupt.ErrCorrupt

// Manifest describes one published snapshot. Field names are the JSON
// contract documented in docs/FORMAT.md; add fields, never rename them.
type Manifest struct {
	Format        string  `json:"format"`
	FormatVersion int     `json:"format_version"`
	SnapshotID    uint64  `json:"snapshot_id"`
	ParentID      uint64  `json:"parent_id"`
	Dataset       string  `json:"dataset"`
	Created       string  `json:"created"`
	Tool          string  `json:"tool"`
	Schema        Schema  `json:"schema"`
	Files         []File  `json:"files"`
	Stats         Stats   `json:"stats"`
	Build         Build   `json:"build"`
	Lineage       Lineage `json:"lineage"`
	WALPosition   uint64  `json:"wal_position"`
	// Shard is set in the manifests of a sharded dataset's shards
	// (docs/FORMAT.md §Shard map) and absent otherwise, so an unsharded
	// manifest is written exactly as before.
	Shard *Shard `json:"shard,omitempty"`
	// Checksum covers the manifest's own bytes (see Marshal). It is the
	// last field so that a reader can blank it in place and re-hash.
	Checksum string `json:"checksum"`
}

// Shard says which shard of how many a snapshot holds, by which hash of
// the series id, and how many input rows belonged to the other shards (so
// that the inputs' rows still add up: rows + duplicates dropped +
// other_shard_rows).
type Shard struct {
	Index          int    `json:"index"`
	Count          int    `json:"count"`
	Hash           string `json:"hash"`
	OtherShardRows int64  `json:"other_shard_rows"`
}

// Schema lists the columns of the data and index files.
type Schema struct {
	Data       []Column `json:"data"`
	Index      []Column `json:"index"`
	Attributes []string `json:"attributes"`
}

// Column is one Arrow field, with Arrow's name for its type.
type Column struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
}

// File is one file of the snapshot.
type File struct {
	Path     string `json:"path"`
	Role     string `json:"role"`
	Tier     string `json:"tier"`
	Format   string `json:"format"`
	Size     int64  `json:"size"`
	Rows     int64  `json:"rows"`
	Batches  int    `json:"batches"`
	Checksum string `json:"checksum"`
}

// Stats are whole-snapshot statistics, checked by snapverify --deep.
type Stats struct {
	Rows              int64  `json:"rows"`
	Series            int64  `json:"series"`
	FirstPeriod       string `json:"first_period"`
	LastPeriod        string `json:"last_period"`
	DuplicatesDropped int64  `json:"duplicates_dropped"`
}

// Build records the options that shaped the snapshot.
type Build struct {
	SeriesColumn string `json:"series_column"`
	PeriodColumn string `json:"period_column"`
	ValueColumn  string `json:"value_column"`
	OnDuplicate  string `json:"on_duplicate"`
	BatchRows    int    `json:"batch_rows"`
	// The tier policy of a tiered snapshot (absent otherwise, so other
	// manifests are written exactly as before): --hot-since as YYYY-MM-DD,
	// --hot-rows, and --format ("vortex": every row in the cold file).
	// Compaction applies the same policy to the next snapshot.
	HotSince   string `json:"hot_since,omitempty"`
	HotRows    int64  `json:"hot_rows,omitempty"`
	DataFormat string `json:"format,omitempty"`
}

// Lineage says where the rows came from. The fields after Inputs were
// added for lake tables (kind delta or iceberg) and are absent from
// manifests of Parquet folders, so those are written exactly as before.
type Lineage struct {
	Kind           string  `json:"kind"`
	Source         string  `json:"source"`
	LakeSnapshotID string  `json:"lake_snapshot_id"`
	Inputs         []Input `json:"inputs"`
	// Location is the table's root (Delta) or location (Iceberg).
	Location string `json:"location,omitempty"`
	// TableVersion is the Delta version, or the Iceberg snapshot's
	// sequence number.
	TableVersion *int64 `json:"table_version,omitempty"`
	// SnapshotTimestamp is when the lake snapshot was committed, RFC 3339.
	SnapshotTimestamp string `json:"snapshot_timestamp,omitempty"`
	// Ref is the Iceberg branch or tag that was read, if one was named.
	Ref string `json:"ref,omitempty"`
	// MetadataLocation is the Iceberg metadata file that was read.
	MetadataLocation string `json:"metadata_location,omitempty"`
}

// Lineage kinds.
const (
	KindParquet = "parquet"
	KindDelta   = "delta"
	KindIceberg = "iceberg"
)

// Input is one input file, identified well enough to notice it changed.
type Input struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	Rows     int64  `json:"rows"`
	Checksum string `json:"checksum"`
}

// Tiered reports whether the snapshot has a cold file (FORMAT.md §9): a
// version-3 snapshot always, a version-4 or later one when it lists one.
func (m *Manifest) Tiered() bool {
	_, ok := m.FileByRole(RoleCold)
	return m.FormatVersion == VersionTiered || m.FormatVersion >= VersionV4 && ok
}

// FileByRole returns the first file with the given role.
func (m *Manifest) FileByRole(role string) (File, bool) {
	for _, f := range m.Files {
		if f.Role == role {
			return f, true
		}
	}
	return File{}, false
}

// Marshal renders the manifest as indented JSON with a trailing newline,
// and sets m.Checksum: the xxHash64 of the exact bytes written, with the
// checksum's own value empty. The data files carry checksums in the
// manifest; this one protects the manifest itself (lineage, stats, paths),
// and because it is computed over the raw bytes it also survives fields
// that a newer writer adds and an older reader does not know.
func Marshal(m *Manifest) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	m.Checksum = ""
	blank, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	blank = append(blank, '\n')
	h := fileutil.NewHash()
	h.Write(blank)
	m.Checksum = fileutil.FormatChecksum(h)
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// checksumKey is how the checksum field appears in a marshalled manifest.
var checksumKey = []byte(`"checksum": "`)

// verifyChecksum recomputes the manifest's checksum over b with the
// checksum value blanked, and compares.
func verifyChecksum(b []byte, want string) error {
	i := bytes.LastIndex(b, checksumKey)
	if i < 0 {
		return corrupt.Errorf("manifest has no checksum field")
	}
	v := i + len(checksumKey)
	end := bytes.IndexByte(b[v:], '"')
	if end < 0 || string(b[v:v+end]) != want {
		return corrupt.Errorf("manifest checksum field is malformed")
	}
	blank := make([]byte, 0, len(b)-end)
	blank = append(append(blank, b[:v]...), b[v+end:]...)
	h := fileutil.NewHash()
	h.Write(blank)
	if got := fileutil.FormatChecksum(h); got != want {
		return corrupt.Errorf("manifest content does not match its checksum (%s, computed %s): it changed after it was written", want, got)
	}
	return nil
}

// maxManifestSize bounds what Parse accepts: a manifest names a handful of
// files and its inputs; anything this large is not one of ours.
const maxManifestSize = 64 << 20

// Parse decodes and validates a manifest. It never panics on any input.
func Parse(b []byte) (*Manifest, error) {
	if len(b) > maxManifestSize {
		return nil, corrupt.Errorf("manifest is %d bytes, limit %d", len(b), maxManifestSize)
	}
	// Peek at the version first so a future format gets a clear message
	// instead of a field-level decoding error.
	var head struct {
		Format        string `json:"format"`
		FormatVersion int    `json:"format_version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, corrupt.Errorf("manifest is not JSON: %w", err)
	}
	if head.Format != Format {
		return nil, corrupt.Errorf("manifest format %q, want %q", head.Format, Format)
	}
	if head.FormatVersion < MinVersion || head.FormatVersion > MaxVersion {
		return nil, corrupt.Errorf("manifest format_version %d is not supported (this build reads %d to %d)", head.FormatVersion, MinVersion, MaxVersion)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil {
		return nil, corrupt.Errorf("manifest: %w", err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if !fileutil.ValidChecksum(m.Checksum) {
		return nil, corrupt.Errorf("manifest %d: checksum %q is not %s<16 hex digits>", m.SnapshotID, m.Checksum, fileutil.ChecksumPrefix)
	}
	if err := verifyChecksum(b, m.Checksum); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate checks the rules a reader relies on before it opens any file the
// manifest names: known version, sane ids, safe relative paths, known roles,
// well-formed checksums, consistent counts.
func (m *Manifest) Validate() error {
	bad := func(format string, a ...any) error {
		return corrupt.Errorf("manifest %d: "+format, append([]any{m.SnapshotID}, a...)...)
	}
	if m.Format != Format || m.FormatVersion < MinVersion || m.FormatVersion > MaxVersion {
		return bad("format %q version %d, want %q version %d to %d", m.Format, m.FormatVersion, Format, MinVersion, MaxVersion)
	}
	if m.SnapshotID == 0 {
		return bad("snapshot_id must be ≥ 1")
	}
	if m.ParentID >= m.SnapshotID {
		return bad("parent_id %d is not older than snapshot_id %d", m.ParentID, m.SnapshotID)
	}
	if err := ValidateDatasetName(m.Dataset); err != nil {
		return bad("%w", err)
	}
	if _, err := time.Parse(time.RFC3339Nano, m.Created); err != nil {
		return bad("created %q is not RFC 3339", m.Created)
	}
	if m.Stats.Rows < 0 || m.Stats.Series < 0 || m.Stats.Series > m.Stats.Rows {
		return bad("stats rows %d series %d are inconsistent", m.Stats.Rows, m.Stats.Series)
	}
	seen := map[string]bool{}
	roles := map[string]int{}
	for i, f := range m.Files {
		if err := validateRelPath(f.Path); err != nil {
			return bad("files[%d]: %w", i, err)
		}
		if seen[f.Path] {
			return bad("files[%d]: %s listed twice", i, f.Path)
		}
		seen[f.Path] = true
		want := FormatArrowIPCFile
		switch f.Role {
		case RoleData, RoleIndex:
		case RolePortable:
			want = FormatParquet
		case RoleCold:
			want = FormatVortex
		default:
			return bad("files[%d]: unknown role %q", i, f.Role)
		}
		roles[f.Role]++
		if f.Format != want {
			return bad("files[%d]: %s file has format %q, want %q", i, f.Role, f.Format, want)
		}
		if f.Size < 0 || f.Rows < 0 || f.Batches < 0 {
			return bad("files[%d]: negative size, rows or batches", i)
		}
		if !fileutil.ValidChecksum(f.Checksum) {
			return bad("files[%d]: checksum %q is not %s<16 hex digits>", i, f.Checksum, fileutil.ChecksumPrefix)
		}
	}
	if roles[RoleData] != 1 || roles[RoleIndex] != 1 {
		return bad("want exactly one data and one index file, have %d and %d", roles[RoleData], roles[RoleIndex])
	}
	if roles[RolePortable] > 1 {
		return bad("want at most one portable file, have %d", roles[RolePortable])
	}
	if p, ok := m.FileByRole(RolePortable); ok && p.Rows != m.Stats.Rows {
		return bad("portable file has %d rows, stats say %d", p.Rows, m.Stats.Rows)
	}
	switch {
	case m.FormatVersion == VersionTiered && roles[RoleCold] != 1,
		m.FormatVersion < VersionTiered && roles[RoleCold] != 0,
		roles[RoleCold] > 1:
		return bad("format_version %d with %d cold files (version %d snapshots have exactly one, version %d and later at most one, others none)", m.FormatVersion, roles[RoleCold], VersionTiered, VersionV4)
	}
	c, _ := m.FileByRole(RoleCold)
	if d, _ := m.FileByRole(RoleData); d.Rows+c.Rows != m.Stats.Rows {
		return bad("data file has %d rows and the cold file %d, stats say %d", d.Rows, c.Rows, m.Stats.Rows)
	}
	if x, _ := m.FileByRole(RoleIndex); x.Rows != m.Stats.Series {
		return bad("index file has %d rows, stats say %d series", x.Rows, m.Stats.Series)
	}
	if sh := m.Shard; sh != nil && (sh.Count < 1 || sh.Index < 0 || sh.Index >= sh.Count || sh.Hash == "" || sh.OtherShardRows < 0) {
		return bad("shard %d of %d (hash %q, other_shard_rows %d) is not a shard", sh.Index, sh.Count, sh.Hash, sh.OtherShardRows)
	}
	return nil
}

// validateRelPath accepts only clean, relative, slash-separated paths that
// stay inside the dataset directory.
func validateRelPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || path.Clean(p) != p ||
		p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("path %q is not a clean relative path inside the dataset", p)
	}
	return nil
}

// ValidateDatasetName accepts names that are safe as one directory name:
// [A-Za-z0-9][A-Za-z0-9._-]{0,127}.
func ValidateDatasetName(name string) error {
	if len(name) == 0 || len(name) > 128 {
		return fmt.Errorf("dataset name %q must be 1-128 characters", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' ||
			i > 0 && (c == '.' || c == '_' || c == '-')
		if !ok {
			return fmt.Errorf("dataset name %q: character %q at %d not allowed (want [A-Za-z0-9][A-Za-z0-9._-]*)", name, c, i)
		}
	}
	return nil
}
