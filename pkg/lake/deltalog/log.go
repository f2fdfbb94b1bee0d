// Package deltalog reads a Delta Lake table's transaction log
// (delta-io/delta PROTOCOL.md) into the snapshot of one version: its
// protocol, metadata and schema, and the set of logical files (data file
// plus optional deletion vector) that make up the table at that version.
//
// It reads _last_checkpoint, classic, multi-part and V2 checkpoints (JSON
// or Parquet, with sidecars) and JSON commits, reconciles add and remove
// actions by (path, deletion vector id), refuses reader features it does
// not implement (naming them), resolves column mapping (name and id mode),
// and loads deletion vectors (inline or on disk). Data files are not read
// here: the builder reads them, guided by the snapshot.
package deltalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/energyscope/servingsnap/pkg/lake/objstore"
)

// LogDir is the log directory below a table root.
const LogDir = "_delta_log"

// ReaderFeatures are the reader features this reader implements. Any other
// feature in a table's readerFeatures makes Open refuse the table.
var ReaderFeatures = []string{"columnMapping", "deletionVectors", "timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"}

// ErrUnsupported marks a table this reader refuses to read: an unknown
// reader feature, a newer reader version, a non-Parquet format.
var ErrUnsupported = errors.New("unsupported Delta table")

// Options select the version to read; at most one of them may be set.
type Options struct {
	Version int64     // a table version; -1 for the latest
	AsOf    time.Time // the latest version committed at or before this time; zero for none
}

// Snapshot is the table at one version.
type Snapshot struct {
	Version   int64
	Timestamp time.Time // when Version was committed (in-commit timestamp, else the commit file's time)
	Protocol  Protocol
	MetaData  MetaData
	Columns   []Column // the table schema, top-level columns in order
	Mapping   string   // column mapping mode: none, name or id
	Files     []File   // the logical files, by modification time, then path
	// Checkpoint is the checkpoint replay started from ("" when the whole
	// log was replayed).
	Checkpoint string
}

// File is one logical file of the snapshot.
type File struct {
	Add
	// Name is the decoded path: relative to the table root, or an
	// absolute location.
	Name string
}

// Column returns the named partition or data column.
func (s *Snapshot) Column(name string) (Column, bool) {
	for _, c := range s.Columns {
		if c.Name == name {
			return c, true
		}
	}
	return Column{}, false
}

var (
	commitRe     = regexp.MustCompile(`^(\d{20})\.json$`)
	classicRe    = regexp.MustCompile(`^(\d{20})\.checkpoint\.parquet$`)
	multipartRe  = regexp.MustCompile(`^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$`)
	uuidCheckRe  = regexp.MustCompile(`^(\d{20})\.checkpoint\.[0-9a-fA-F-]{36}\.(json|parquet)$`)
	sidecarDir   = LogDir + "/_sidecars"
	lastCheckKey = LogDir + "/_last_checkpoint"
)

type checkpoint struct {
	version int64
	parts   []string // file names (one unless multi-part)
}

type logListing struct {
	commits     map[int64]objstore.Entry
	checkpoints map[int64][]checkpoint
}

func listLog(ctx context.Context, st objstore.Store) (*logListing, error) {
	ents, err := st.ReadDir(ctx, LogDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: not a Delta table (no %s directory)", st.Location(""), LogDir)
		}
		return nil, fmt.Errorf("list %s: %w", st.Location(LogDir), err)
	}
	l := &logListing{commits: map[int64]objstore.Entry{}, checkpoints: map[int64][]checkpoint{}}
	multi := map[string][]string{} // "version/parts" -> names
	for _, e := range ents {
		base := path.Base(e.Name)
		if m := commitRe.FindStringSubmatch(base); m != nil {
			l.commits[mustInt(m[1])] = e
		} else if m := classicRe.FindStringSubmatch(base); m != nil {
			v := mustInt(m[1])
			l.checkpoints[v] = append(l.checkpoints[v], checkpoint{version: v, parts: []string{e.Name}})
		} else if m := uuidCheckRe.FindStringSubmatch(base); m != nil {
			v := mustInt(m[1])
			l.checkpoints[v] = append(l.checkpoints[v], checkpoint{version: v, parts: []string{e.Name}})
		} else if m := multipartRe.FindStringSubmatch(base); m != nil {
			key := m[1] + "/" + m[3]
			multi[key] = append(multi[key], e.Name)
		}
	}
	for key, names := range multi {
		vs, ps, _ := strings.Cut(key, "/")
		p, _ := strconv.Atoi(ps)
		if p < 1 || len(names) != p {
			continue // incomplete multi-part checkpoints must be ignored
		}
		sort.Strings(names)
		v := mustInt(vs)
		l.checkpoints[v] = append(l.checkpoints[v], checkpoint{version: v, parts: names})
	}
	return l, nil
}

func mustInt(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func commitName(v int64) string { return fmt.Sprintf("%s/%020d.json", LogDir, v) }

// Open reads the snapshot of the table rooted at st selected by opt.
func Open(ctx context.Context, st objstore.Store, opt Options) (*Snapshot, error) {
	if opt.Version >= 0 && !opt.AsOf.IsZero() {
		return nil, fmt.Errorf("choose a table version or a time, not both")
	}
	l, err := listLog(ctx, st)
	if err != nil {
		return nil, err
	}
	if len(l.commits) == 0 && len(l.checkpoints) == 0 {
		return nil, fmt.Errorf("%s: the log holds no commits", st.Location(LogDir))
	}
	var latest, earliest int64 = -1, -1
	for v := range l.commits {
		latest = max(latest, v)
		if earliest < 0 || v < earliest {
			earliest = v
		}
	}
	for v := range l.checkpoints {
		latest = max(latest, v)
	}
	target := latest
	var asOfInfo *CommitInfo
	switch {
	case opt.Version >= 0:
		if opt.Version > latest {
			return nil, fmt.Errorf("table version %d does not exist: the latest version of %s is %d", opt.Version, st.Location(""), latest)
		}
		target = opt.Version
	case !opt.AsOf.IsZero():
		target = -1
		for v := latest; v >= 0; v-- {
			e, ok := l.commits[v]
			if !ok {
				break
			}
			ts, info, err := commitTime(ctx, st, e)
			if err != nil {
				return nil, err
			}
			if !ts.After(opt.AsOf) {
				target, asOfInfo = v, info
				break
			}
		}
		if target < 0 {
			return nil, fmt.Errorf("no version of %s was committed at or before %s (the earliest commit in the log is version %d)", st.Location(""), opt.AsOf.UTC().Format(time.RFC3339), earliest)
		}
	}

	// The newest complete checkpoint at or before the target, with
	// _last_checkpoint as a hint when it names one the listing has.
	cpVersion := int64(-1)
	for v := range l.checkpoints {
		if v <= target && v > cpVersion {
			cpVersion = v
		}
	}
	if b, err := st.ReadFile(ctx, lastCheckKey); err == nil {
		var lc struct {
			Version *int64 `json:"version"`
		}
		if json.Unmarshal(b, &lc) == nil && lc.Version != nil && *lc.Version <= target && len(l.checkpoints[*lc.Version]) > 0 && *lc.Version > cpVersion {
			cpVersion = *lc.Version
		}
	}
	s := &Snapshot{Version: target}
	r := &replay{files: map[string]Add{}}
	if cpVersion >= 0 {
		cp := l.checkpoints[cpVersion][0]
		if err := r.checkpoint(ctx, st, cp); err != nil {
			return nil, err
		}
		s.Checkpoint = cp.parts[0]
	}
	for v := cpVersion + 1; v <= target; v++ {
		e, ok := l.commits[v]
		if !ok {
			return nil, fmt.Errorf("%s is missing: the log cannot be replayed to version %d", st.Location(commitName(v)), target)
		}
		b, err := st.ReadFile(ctx, e.Name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", st.Location(e.Name), err)
		}
		acts, err := ParseActions(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st.Location(e.Name), err)
		}
		if err := r.apply(acts, false); err != nil {
			return nil, fmt.Errorf("%s: %w", st.Location(e.Name), err)
		}
		if v == target {
			asOfInfo = r.commitInfo
		}
	}
	if r.protocol == nil || r.metaData == nil {
		return nil, fmt.Errorf("%s: no protocol or metaData action up to version %d: the log is incomplete", st.Location(LogDir), target)
	}
	s.Protocol, s.MetaData = *r.protocol, *r.metaData
	if err := CheckProtocol(s.Protocol); err != nil {
		return nil, fmt.Errorf("%s version %d: %w", st.Location(""), target, err)
	}
	if p := s.MetaData.Format.Provider; p != "" && p != "parquet" {
		return nil, fmt.Errorf("%s: data files in format %q: %w", st.Location(""), p, ErrUnsupported)
	}
	s.Mapping = MappingNone
	if mode := s.MetaData.Configuration["delta.columnMapping.mode"]; mode != "" && mode != MappingNone && mappingEnabled(s.Protocol) {
		if mode != MappingName && mode != MappingID {
			return nil, fmt.Errorf("%s: column mapping mode %q: %w", st.Location(""), mode, ErrUnsupported)
		}
		s.Mapping = mode
	}
	if s.Columns, err = ParseSchema(s.MetaData.SchemaString, s.Mapping); err != nil {
		return nil, fmt.Errorf("%s version %d: %w", st.Location(""), target, err)
	}
	for _, pc := range s.MetaData.PartitionColumns {
		if _, ok := s.Column(pc); !ok {
			return nil, fmt.Errorf("%s: partition column %q is not in the schema", st.Location(""), pc)
		}
	}
	// Timestamp of the version.
	switch {
	case asOfInfo != nil && asOfInfo.InCommitTimestamp != nil:
		s.Timestamp = time.UnixMilli(*asOfInfo.InCommitTimestamp).UTC()
	case l.commits[target].Name != "":
		s.Timestamp = l.commits[target].ModTime.UTC()
	}
	for p, a := range r.files {
		name, err := url.PathUnescape(p)
		if err != nil {
			return nil, fmt.Errorf("add %q: %w", p, err)
		}
		s.Files = append(s.Files, File{Add: a, Name: name})
	}
	sort.Slice(s.Files, func(i, j int) bool {
		a, b := s.Files[i], s.Files[j]
		if a.ModificationTime != b.ModificationTime {
			return a.ModificationTime < b.ModificationTime
		}
		return a.Name < b.Name
	})
	return s, nil
}

// commitTime is when a commit was made: its in-commit timestamp when it
// has one, else the commit file's modification time.
func commitTime(ctx context.Context, st objstore.Store, e objstore.Entry) (time.Time, *CommitInfo, error) {
	b, err := st.ReadFile(ctx, e.Name)
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("read %s: %w", st.Location(e.Name), err)
	}
	acts, err := ParseActions(b)
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("%s: %w", st.Location(e.Name), err)
	}
	for _, a := range acts {
		if a.CommitInfo != nil && a.CommitInfo.InCommitTimestamp != nil {
			return time.UnixMilli(*a.CommitInfo.InCommitTimestamp), a.CommitInfo, nil
		}
	}
	return e.ModTime, nil, nil
}

func mappingEnabled(p Protocol) bool {
	switch {
	case p.MinReaderVersion == 2:
		return true
	case p.MinReaderVersion >= 3:
		return slices.Contains(p.ReaderFeatures, "columnMapping")
	}
	return false
}

// CheckProtocol refuses a protocol this reader cannot honour: a reader
// version above 3, or reader features it does not implement (all named).
func CheckProtocol(p Protocol) error {
	if p.MinReaderVersion > 3 {
		return fmt.Errorf("minReaderVersion %d (this reader implements up to 3): %w", p.MinReaderVersion, ErrUnsupported)
	}
	if p.MinReaderVersion < 3 {
		return nil
	}
	var unknown []string
	for _, f := range p.ReaderFeatures {
		if !slices.Contains(ReaderFeatures, f) {
			unknown = append(unknown, f)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("reader features %s are not implemented by this reader (it implements %s): %w",
			strings.Join(unknown, ", "), strings.Join(ReaderFeatures, ", "), ErrUnsupported)
	}
	return nil
}

// replay accumulates the table state.
type replay struct {
	protocol   *Protocol
	metaData   *MetaData
	commitInfo *CommitInfo
	files      map[string]Add // by raw path; at most one logical file per path
}

// apply applies one commit's (or checkpoint's) actions. Actions within a
// commit are unordered, so removes are applied before adds: a commit that
// replaces a file's deletion vector removes (path, old DV) and adds (path,
// new DV).
func (r *replay) apply(acts []Action, fromCheckpoint bool) error {
	r.commitInfo = nil
	for _, a := range acts {
		switch {
		case a.Protocol != nil:
			r.protocol = a.Protocol
		case a.MetaData != nil:
			r.metaData = a.MetaData
		case a.CommitInfo != nil:
			r.commitInfo = a.CommitInfo
		case a.Remove != nil && !fromCheckpoint:
			if cur, ok := r.files[a.Remove.Path]; ok && cur.DeletionVector.UniqueID() == a.Remove.DeletionVector.UniqueID() {
				delete(r.files, a.Remove.Path)
			}
		}
	}
	for _, a := range acts {
		if a.Add != nil {
			r.files[a.Add.Path] = *a.Add
		}
	}
	return nil
}

// checkpoint loads a checkpoint (all its parts, and the sidecars of a V2
// checkpoint).
func (r *replay) checkpoint(ctx context.Context, st objstore.Store, cp checkpoint) error {
	var all []Action
	for _, name := range cp.parts {
		acts, err := readActionsFile(ctx, st, name)
		if err != nil {
			return err
		}
		all = append(all, acts...)
	}
	var sidecars []Action
	for _, a := range all {
		if a.Sidecar != nil {
			p, err := url.PathUnescape(a.Sidecar.Path)
			if err != nil {
				return fmt.Errorf("%s: sidecar %q: %w", st.Location(cp.parts[0]), a.Sidecar.Path, err)
			}
			if !strings.Contains(p, "://") && !strings.HasPrefix(p, "/") {
				p = sidecarDir + "/" + path.Base(p)
			}
			acts, err := readActionsFile(ctx, st, p)
			if err != nil {
				return fmt.Errorf("sidecar of %s: %w", st.Location(cp.parts[0]), err)
			}
			for _, s := range acts {
				if s.Add != nil || s.Remove != nil {
					sidecars = append(sidecars, s)
				} else {
					return fmt.Errorf("%s: sidecars hold only add and remove actions", st.Location(p))
				}
			}
		}
	}
	return r.apply(append(all, sidecars...), true)
}

// readActionsFile reads a JSON or Parquet file of actions.
func readActionsFile(ctx context.Context, st objstore.Store, name string) ([]Action, error) {
	if strings.HasSuffix(name, ".json") {
		b, err := st.ReadFile(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", st.Location(name), err)
		}
		acts, err := ParseActions(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st.Location(name), err)
		}
		return acts, nil
	}
	f, _, err := st.Open(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", st.Location(name), err)
	}
	defer f.Close()
	acts, err := readParquetActions(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", st.Location(name), err)
	}
	return acts, nil
}
