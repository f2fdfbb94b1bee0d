package sortwrite

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/zstd"

	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// A split directory (snapbuild split --out DIR):
//
//	DIR/shard-000I/part-000J-of-000M.run   shard I's rows of part J (splitfmt.go)
//	DIR/shard-000I/part-000J-of-000M.json  its manifest (pieceHead), written last
//	DIR/parts/part-000J-of-000M.meta       part J's dictionaries and first values
//
// Every file is written under a temporary name and renamed into place;
// the manifest names the other two with their sizes and checksums, so a
// build takes a piece only once it is whole, and refuses a piece whose
// files do not match it.

const (
	pieceFormat  = "servingsnap-split-piece"
	pieceVersion = 2
	runExt       = ".run"
	headExt      = ".json"
	metaExt      = ".meta"
	partsDir     = "parts"
)

func shardDirName(i int) string { return fmt.Sprintf("shard-%04d", i) }

func pieceName(p SplitPart) string { return fmt.Sprintf("part-%04d-of-%04d", p.Index, p.Count) }

// pieceHead is a piece's manifest.
type pieceHead struct {
	Format           string           `json:"format"`
	Version          int              `json:"version"`
	Tool             string           `json:"tool"`
	Part             int              `json:"part"`
	Parts            int              `json:"parts"`
	Shard            int              `json:"shard"`
	Shards           int              `json:"shards"`
	ShardFunction    string           `json:"shard_function"`
	SeriesColumn     string           `json:"series_column"`
	PeriodColumn     string           `json:"period_column"`
	ValueColumn      string           `json:"value_column"`
	MixedPeriodTypes bool             `json:"mixed_period_types,omitempty"`
	Lineage          manifest.Lineage `json:"lineage"`
	Files            int              `json:"files"`      // the table's data files
	TableRows        int64            `json:"table_rows"` // the table's rows
	PartRows         int64            `json:"part_rows"`  // the part's rows, every shard's
	Rows             int64            `json:"rows"`       // the piece's
	RecordSize       int              `json:"record_size"`
	Inputs           []pieceInput     `json:"inputs"` // the part's files
	Runs             []pieceRun       `json:"runs"`
	Piece            pieceFile        `json:"piece"`
	Meta             pieceFile        `json:"meta"`
}

type pieceInput struct {
	Path      string  `json:"path"`
	Size      int64   `json:"size"`
	Rows      int64   `json:"rows"`
	FirstRow  int64   `json:"first_row"`
	GroupRows []int64 `json:"group_rows"`
	Checksum  string  `json:"checksum"`
}

// pieceRun is one run of a piece. Its records leave out the other
// columns Omit lists (indexes in the unified schema's order of the
// columns other than series, period and value): those the part still
// took for attributes when the run was written; RecordSize is what is
// left of a record.
type pieceRun struct {
	Offset     int64 `json:"offset"`
	Bytes      int64 `json:"bytes"`
	Records    int64 `json:"records"`
	RecordSize int   `json:"record_size"`
	Omit       []int `json:"omit,omitempty"`
}

// pieceFile names a file of the split relative to the manifest's
// directory, with its size and checksum.
type pieceFile struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	Checksum string `json:"checksum"`
}

func writePieceHead(path string, h *pieceHead) error {
	b, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileOnce(path, append(b, '\n')); err != nil {
		return fmt.Errorf("split: %w", err)
	}
	return nil
}

func readPieceHead(path string) (*pieceHead, int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	var h pieceHead
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, 0, fmt.Errorf("piece %s: %w", path, err)
	}
	if h.Format != pieceFormat || h.Version != pieceVersion {
		return nil, 0, fmt.Errorf("piece %s: format %q version %d, want %q version %d: split the table again with this tool", path, h.Format, h.Version, pieceFormat, pieceVersion)
	}
	return &h, int64(len(b)), nil
}

// writeFileOnce replaces path with data atomically, as
// fileutil.WriteFileAtomic, through a temporary file of a name of its own,
// so two writers of one path (a retried part) never mix their bytes.
func writeFileOnce(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return fileutil.SyncDir(dir)
}

// hashWriter checksums what it writes.
type hashWriter struct {
	w io.Writer
	h hash.Hash64
}

func newHashWriter(w io.Writer) *hashWriter { return &hashWriter{w: w, h: fileutil.NewHash()} }

func (h *hashWriter) Write(p []byte) (int, error) {
	h.h.Write(p)
	return h.w.Write(p)
}

func (h *hashWriter) sum() string { return fileutil.FormatChecksum(h.h) }

func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// partMeta is what a shard's build needs of a part beyond its rows: the
// unified schema, the part's dictionaries (its records' codes index
// them), and, for the attribute choice over every series, each series'
// first value of every column the part still takes for an attribute.
type partMeta struct {
	Schema    []byte     // Arrow IPC stream of the unified schema (no batches)
	SeriesIDs []string   // by the part's series code
	Seen      []bool     // by series code: a row was read
	Strings   [][]string // per other column (t.others): its dictionary; nil if not a string
	IsAttr    []bool     // per other column: constant within every series of the part
	Firsts    []partFirst
}

// partFirst is one other column's first value per series code.
type partFirst struct {
	Codes       []uint32
	Data, Valid []byte
}

var metaEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedBetterCompression))

// writePartMeta writes the part's meta file and returns its entry.
func writePartMeta(dir string, p SplitPart, e *external) (pieceFile, error) {
	t := e.t
	var fields []arrow.Field
	for _, c := range t.unified.Columns {
		fields = append(fields, arrow.Field{Name: c.Name, Type: c.Type, Nullable: true})
	}
	var sb bytes.Buffer
	iw := ipc.NewWriter(&sb, ipc.WithSchema(arrow.NewSchema(fields, nil)), ipc.WithAllocator(memory.DefaultAllocator))
	if err := iw.Close(); err != nil {
		return pieceFile{}, fmt.Errorf("split: schema: %w", err)
	}
	m := partMeta{Schema: sb.Bytes(), SeriesIDs: t.series.dict.values, Seen: e.seen, IsAttr: e.isAttr}
	for i, st := range t.others {
		if st.kind == kindString {
			m.Strings = append(m.Strings, st.dict.values)
		} else {
			m.Strings = append(m.Strings, nil)
		}
		f := e.firsts[i]
		m.Firsts = append(m.Firsts, partFirst{Codes: f.codes, Data: f.data, Valid: f.valid})
	}
	var raw bytes.Buffer
	if err := gob.NewEncoder(&raw).Encode(&m); err != nil {
		return pieceFile{}, fmt.Errorf("split: meta: %w", err)
	}
	// Every shard's build reads every part's meta file: compressed, its
	// dictionaries cost a fraction of their size.
	b := bytes.NewBuffer(metaEncoder.EncodeAll(raw.Bytes(), nil))
	pd := filepath.Join(dir, partsDir)
	if err := os.MkdirAll(pd, 0o755); err != nil {
		return pieceFile{}, fmt.Errorf("split: %w", err)
	}
	name := pieceName(p) + metaExt
	if err := writeFileOnce(filepath.Join(pd, name), b.Bytes()); err != nil {
		return pieceFile{}, fmt.Errorf("split: %w", err)
	}
	h := fileutil.NewHash()
	h.Write(b.Bytes())
	return pieceFile{Path: "../" + partsDir + "/" + name, Size: int64(b.Len()), Checksum: fileutil.FormatChecksum(h)}, nil
}

// readPartMeta reads and checks a part's meta file.
func readPartMeta(path string, want pieceFile) (*partMeta, []arrow.Field, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	h := fileutil.NewHash()
	h.Write(b)
	if int64(len(b)) != want.Size || fileutil.FormatChecksum(h) != want.Checksum {
		return nil, nil, fmt.Errorf("%s: %d bytes, checksum %s; its piece names %d bytes, %s (written by another split?)",
			path, len(b), fileutil.FormatChecksum(h), want.Size, want.Checksum)
	}
	raw, err := splitDecoder.DecodeAll(b, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	var m partMeta
	if err := gob.NewDecoder(bytes.NewReader(raw)).Decode(&m); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	r, err := ipc.NewReader(bytes.NewReader(m.Schema))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: schema: %w", path, err)
	}
	defer r.Release()
	fields := r.Schema().Fields()
	if len(m.Seen) > len(m.SeriesIDs) || len(m.Strings) != len(m.IsAttr) || len(m.Firsts) != len(m.IsAttr) {
		return nil, nil, fmt.Errorf("%s: inconsistent meta", path)
	}
	return &m, fields, nil
}
