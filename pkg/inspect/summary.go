package inspect

import (
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/pkg/manifest"
)

// Summary describes one snapshot: its manifest, plus what opening its files
// adds (attribute statistics) or why they would not open. It is the JSON
// document of `snapinspect ROOT/DATASET --json`.
type Summary struct {
	Dataset           string          `json:"dataset"`
	Dir               string          `json:"dir"`
	SnapshotID        uint64          `json:"snapshot_id"`
	Current           bool            `json:"current"`
	CurrentID         uint64          `json:"current_id"`
	ParentID          uint64          `json:"parent_id"`
	Created           string          `json:"created"`
	Tool              string          `json:"tool"`
	Rows              int64           `json:"rows"`
	Series            int64           `json:"series"`
	FirstPeriod       string          `json:"first_period"`
	LastPeriod        string          `json:"last_period"`
	DuplicatesDropped int64           `json:"duplicates_dropped"`
	Files             []manifest.File `json:"files"`
	// Tiers is where the rows live: hot file, cold file, policy.
	Tiers       Tiers            `json:"tiers"`
	Schema      manifest.Schema  `json:"schema"`
	Attributes  []Attribute      `json:"attributes"`
	Lineage     manifest.Lineage `json:"lineage"`
	Build       manifest.Build   `json:"build"`
	WALPosition uint64           `json:"wal_position"`
	// LiveWrites is the dataset's write-ahead log, when it has one (CURRENT
	// only: older vintages are not served).
	LiveWrites *LiveWrites `json:"live_writes,omitempty"`
	// Error is why the snapshot's files did not open ("" when they did);
	// the rest of the summary then comes from the manifest alone.
	Error string `json:"error"`
}

// Attribute is a per-series attribute column of the index. Distinct and
// Nulls count over series; they are null in JSON when the files did not
// open.
type Attribute struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Distinct *int64 `json:"distinct"`
	Nulls    *int64 `json:"nulls"`
}

// Summarize describes vintage id of the dataset at dir (CURRENT when id is
// 0). It fails only when the manifest cannot be read; a snapshot whose
// files fail to open is summarised from its manifest with Error set.
func Summarize(dir string, id uint64) (*Summary, error) {
	ds, err := Dataset(dir)
	if err != nil {
		return nil, err
	}
	id, err = Resolve(ds, id)
	if err != nil {
		return nil, err
	}
	m, err := ds.Load(id)
	if err != nil {
		return nil, err
	}
	cur := currentID(ds)
	s := &Summary{
		Dataset:           ds.Name,
		Dir:               ds.Dir,
		SnapshotID:        m.SnapshotID,
		Current:           cur == m.SnapshotID,
		CurrentID:         cur,
		ParentID:          m.ParentID,
		Created:           m.Created,
		Tool:              m.Tool,
		Rows:              m.Stats.Rows,
		Series:            m.Stats.Series,
		FirstPeriod:       m.Stats.FirstPeriod,
		LastPeriod:        m.Stats.LastPeriod,
		DuplicatesDropped: m.Stats.DuplicatesDropped,
		Files:             nonNil(m.Files),
		Tiers:             tiersOf(m),
		Schema:            m.Schema,
		Attributes:        []Attribute{},
		Lineage:           m.Lineage,
		Build:             m.Build,
		WALPosition:       m.WALPosition,
	}
	s.Schema.Data = nonNil(s.Schema.Data)
	s.Schema.Index = nonNil(s.Schema.Index)
	s.Schema.Attributes = nonNil(s.Schema.Attributes)
	s.Lineage.Inputs = nonNil(s.Lineage.Inputs)
	types := map[string]string{}
	for _, c := range m.Schema.Index {
		types[c.Name] = c.Type
	}
	for _, a := range m.Schema.Attributes {
		s.Attributes = append(s.Attributes, Attribute{Name: a, Type: types[a]})
	}
	if s.Current {
		cp, err := ds.WALCheckpoint()
		if err != nil {
			return nil, err
		}
		if s.LiveWrites, err = liveWrites(ds.Dir, cp.Folded); err != nil {
			return nil, err
		}
	}
	snap, err := openChecked(ds.Dir, id)
	if err != nil {
		s.Error = err.Error()
		return s, nil
	}
	defer snap.Close()
	fields, cols := snap.Index().Attributes()
	for i, f := range fields {
		for j := range s.Attributes {
			if s.Attributes[j].Name == f.Name {
				d, n := distinct(cols[i])
				s.Attributes[j].Distinct, s.Attributes[j].Nulls = &d, &n
				if dt, ok := f.Type.(*arrow.DictionaryType); ok && snap.Index().Coded(i) {
					// A code column (FORMAT.md §4): its values' type, and how it is stored.
					s.Attributes[j].Type = fmt.Sprintf("%s (%s codes)", dt.ValueType, dt.IndexType)
				}
			}
		}
	}
	return s, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// TextOptions tune the text rendering of a summary.
type TextOptions struct {
	// MaxInputs bounds the lineage inputs listed one per line; the rest
	// are counted. 0 means DefaultMaxInputs, negative means all.
	MaxInputs int
}

// DefaultMaxInputs is how many lineage inputs the text summary lists.
const DefaultMaxInputs = 8

// WriteText renders the summary for a terminal.
func (s *Summary) WriteText(w io.Writer, opt TextOptions) error {
	cur := "CURRENT"
	if !s.Current {
		cur = "not CURRENT"
		if s.CurrentID != 0 {
			cur += fmt.Sprintf("; CURRENT is %d", s.CurrentID)
		}
	}
	fmt.Fprintf(w, "snapshot %d of %s (%s)  %s\n", s.SnapshotID, s.Dataset, cur, s.Dir)
	if s.Error != "" {
		fmt.Fprintf(w, "  ERROR: the snapshot's files do not open: %s\n", s.Error)
	}
	parent := fmt.Sprint(s.ParentID)
	if s.ParentID == 0 {
		parent = "none"
	}
	kv := newTable()
	kv.add("parent", parent)
	kv.add("created", s.Created)
	kv.add("tool", s.Tool)
	kv.add("rows", fmt.Sprintf("%s in %s series", Commas(s.Rows), Commas(s.Series)))
	if s.FirstPeriod == "" {
		kv.add("periods", "- (empty)")
	} else {
		kv.add("periods", s.FirstPeriod+" .. "+s.LastPeriod)
	}
	kv.add("duplicates", Commas(s.DuplicatesDropped)+" dropped")
	kv.add("wal position", fmt.Sprint(s.WALPosition))
	kv.write(w, "  ")

	fmt.Fprintf(w, "\nfiles\n")
	ft := newTable("role", "tier", "format", "size", "rows", "batches", "checksum", "path").alignRight(3, 4, 5)
	for _, f := range s.Files {
		ft.add(f.Role, orDash(f.Tier), f.Format, HumanBytes(f.Size), Commas(f.Rows), Commas(int64(f.Batches)), f.Checksum, f.Path)
	}
	ft.write(w, "  ")
	s.Tiers.writeText(w)

	writeColumns := func(title string, cols []manifest.Column) {
		fmt.Fprintf(w, "\n%s (%d columns)\n", title, len(cols))
		t := newTable("name", "type", "nullable")
		for _, c := range cols {
			t.add(c.Name, c.Type, yesNo(c.Nullable))
		}
		t.write(w, "  ")
	}
	writeColumns("data schema", s.Schema.Data)
	writeColumns("index schema", s.Schema.Index)

	fmt.Fprintf(w, "\nattributes (%d, one value per series, stored in the index)\n", len(s.Attributes))
	if len(s.Attributes) > 0 {
		at := newTable("name", "type", "distinct", "nulls").alignRight(2, 3)
		for _, a := range s.Attributes {
			at.add(a.Name, a.Type, countOrDash(a.Distinct), countOrDash(a.Nulls))
		}
		at.write(w, "  ")
	}

	l := s.Lineage
	var inBytes, inRows int64
	for _, in := range l.Inputs {
		inBytes += in.Size
		inRows += in.Rows
	}
	fmt.Fprintf(w, "\nlineage\n")
	lt := newTable()
	lt.add("kind", orDash(l.Kind))
	lt.add("source", orDash(l.Source))
	lt.add("lake snapshot", orDash(l.LakeSnapshotID))
	if l.Location != "" {
		lt.add("location", l.Location)
	}
	if l.TableVersion != nil {
		lt.add("table version", fmt.Sprint(*l.TableVersion))
	}
	if l.SnapshotTimestamp != "" {
		lt.add("committed", l.SnapshotTimestamp)
	}
	if l.Ref != "" {
		lt.add("ref", l.Ref)
	}
	if l.MetadataLocation != "" {
		lt.add("metadata", l.MetadataLocation)
	}
	lt.add("inputs", fmt.Sprintf("%s files, %s, %s rows", Commas(int64(len(l.Inputs))), HumanBytes(inBytes), Commas(inRows)))
	lt.write(w, "  ")
	if len(l.Inputs) > 0 {
		max := opt.MaxInputs
		if max == 0 {
			max = DefaultMaxInputs
		}
		shown := l.Inputs
		if max > 0 && len(shown) > max {
			shown = shown[:max]
		}
		it := newTable("size", "rows", "checksum", "path").alignRight(0, 1)
		for _, in := range shown {
			it.add(HumanBytes(in.Size), Commas(in.Rows), in.Checksum, in.Path)
		}
		it.write(w, "    ")
		if n := len(l.Inputs) - len(shown); n > 0 {
			fmt.Fprintf(w, "    … %s more (--json lists every input)\n", Commas(int64(n)))
		}
	}

	fmt.Fprintf(w, "\nbuild\n")
	bt := newTable()
	bt.add("series column", s.Build.SeriesColumn)
	bt.add("period column", s.Build.PeriodColumn)
	bt.add("value column", s.Build.ValueColumn)
	bt.add("on duplicate", s.Build.OnDuplicate)
	bt.add("batch rows", Commas(int64(s.Build.BatchRows)))
	if s.Build.HotSince != "" {
		bt.add("hot since", s.Build.HotSince)
	}
	if s.Build.HotRows > 0 {
		bt.add("hot rows", Commas(s.Build.HotRows))
	}
	if s.Build.DataFormat != "" {
		bt.add("format", s.Build.DataFormat)
	}
	if err := bt.write(w, "  "); err != nil {
		return err
	}
	if s.LiveWrites != nil {
		return s.LiveWrites.writeText(w)
	}
	return nil
}

// WriteJSON renders the summary as indented JSON.
func (s *Summary) WriteJSON(w io.Writer) error { return writeJSON(w, s) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func countOrDash(p *int64) string {
	if p == nil {
		return "-"
	}
	return Commas(*p)
}

// attrNames lists attribute column names, for messages.
func attrNames(fields []arrow.Field) string {
	if len(fields) == 0 {
		return "none"
	}
	var s []string
	for _, f := range fields {
		s = append(s, f.Name)
	}
	return strings.Join(s, ", ")
}
