package sortwrite

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/pkg/manifest"
)

// splitSet is the M pieces of one shard (Options.FromSplit).
type splitSet struct {
	dir   string // the shard's directory in the split
	heads []*pieceHead
	// bytesRead counts the manifests, meta files and pieces read.
	bytesRead int64
}

// openSplit reads and checks the manifests of shard opt.Shard's pieces:
// one per part, all of one split of one table, covering its files in
// order. It names the piece at fault.
func openSplit(opt Options) (*splitSet, error) {
	if opt.Shard.Count < 1 {
		return nil, fmt.Errorf("--from-split builds one shard: give --shard I/N")
	}
	if err := checkSplitDir(opt.FromSplit); err != nil {
		return nil, err
	}
	sd := filepath.Join(opt.FromSplit, shardDirName(opt.Shard.Index))
	names, err := filepath.Glob(filepath.Join(sd, "part-*"+headExt))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("split %s: no piece of shard %s in %s: run snapbuild split for every part first", opt.FromSplit, opt.Shard, sd)
	}
	slices.Sort(names)
	s := &splitSet{dir: sd}
	var parts int
	for _, n := range names {
		h, size, err := readPieceHead(n)
		if err != nil {
			return nil, err
		}
		s.bytesRead += size
		base := filepath.Base(n)
		if err := h.matches(opt, base); err != nil {
			return nil, fmt.Errorf("piece %s: %w", n, err)
		}
		if parts == 0 {
			parts = h.Parts
			s.heads = make([]*pieceHead, parts)
		}
		if h.Parts != parts {
			return nil, fmt.Errorf("piece %s is part %d of %d, but %s is of %d parts: pieces of two splits (remove the older split's)",
				n, h.Part, h.Parts, filepath.Base(names[0]), parts)
		}
		if s.heads[h.Part] != nil {
			return nil, fmt.Errorf("piece %s: part %d given twice", n, h.Part)
		}
		s.heads[h.Part] = h
	}
	for j, h := range s.heads {
		if h == nil {
			return nil, fmt.Errorf("split %s: piece %s of shard %s is missing: run snapbuild split --part %d/%d",
				opt.FromSplit, filepath.Join(sd, pieceName(SplitPart{Index: j, Count: parts})+headExt), opt.Shard, j, parts)
		}
	}
	if err := s.checkCover(); err != nil {
		return nil, err
	}
	return s, nil
}

// matches checks one piece's manifest against the build's options and
// its file name.
func (h *pieceHead) matches(opt Options, base string) error {
	switch {
	case base != pieceName(SplitPart{Index: h.Part, Count: h.Parts})+headExt:
		return fmt.Errorf("says it is part %d of %d, not what its name says", h.Part, h.Parts)
	case h.Part < 0 || h.Part >= h.Parts:
		return fmt.Errorf("part %d of %d", h.Part, h.Parts)
	case h.Shard != opt.Shard.Index || h.Shards != opt.Shard.Count:
		return fmt.Errorf("holds shard %d/%d, not %s", h.Shard, h.Shards, opt.Shard)
	case h.ShardFunction != opt.Shard.HashName():
		return fmt.Errorf("was split with shard function %s, not %s", h.ShardFunction, opt.Shard.HashName())
	case h.SeriesColumn != opt.SeriesColumn || h.PeriodColumn != opt.PeriodColumn || h.ValueColumn != opt.ValueColumn:
		return fmt.Errorf("was split with columns %s, %s, %s, not %s, %s, %s",
			h.SeriesColumn, h.PeriodColumn, h.ValueColumn, opt.SeriesColumn, opt.PeriodColumn, opt.ValueColumn)
	case h.MixedPeriodTypes != opt.MixedPeriodTypes:
		return fmt.Errorf("was split with mixed period types %v, not %v", h.MixedPeriodTypes, opt.MixedPeriodTypes)
	}
	var recs int64
	for _, r := range h.Runs {
		recs += r.Records
	}
	if recs != h.Rows {
		return fmt.Errorf("its runs hold %d records, but it says %d rows", recs, h.Rows)
	}
	return nil
}

// checkCover checks that the parts are of one table snapshot and cover
// its files in order, each once.
func (s *splitSet) checkCover() error {
	h0 := s.heads[0]
	lin0, _ := json.Marshal(h0.Lineage)
	var row int64
	files := 0
	for _, h := range s.heads {
		name := filepath.Join(s.dir, pieceName(SplitPart{Index: h.Part, Count: h.Parts})+headExt)
		if lin, _ := json.Marshal(h.Lineage); string(lin) != string(lin0) || h.Files != h0.Files || h.TableRows != h0.TableRows {
			return fmt.Errorf("piece %s was split from another table snapshot than part 0 (%s): split every part of one snapshot again", name, h0.Lineage.LakeSnapshotID)
		}
		if h.RecordSize != h0.RecordSize {
			return fmt.Errorf("piece %s has %d-byte records, part 0 %d: pieces of two splits", name, h.RecordSize, h0.RecordSize)
		}
		var rows int64
		for _, in := range h.Inputs {
			if in.FirstRow != row {
				return fmt.Errorf("piece %s: input %s starts at row %d, want %d: the parts do not cover the table's files in order", name, in.Path, in.FirstRow, row)
			}
			row += in.Rows
			rows += in.Rows
			files++
		}
		if rows != h.PartRows {
			return fmt.Errorf("piece %s: its inputs hold %d rows, it says %d", name, rows, h.PartRows)
		}
	}
	if files != h0.Files || row != h0.TableRows {
		return fmt.Errorf("split %s: the parts read %d files (%d rows) of the table's %d (%d rows)", s.dir, files, row, h0.Files, h0.TableRows)
	}
	return nil
}

// lineage is the table's lineage with every input file of the split.
func (s *splitSet) lineage() (manifest.Lineage, []string, []*input) {
	lin := s.heads[0].Lineage
	var sums []string
	var ins []*input
	for _, h := range s.heads {
		for _, in := range h.Inputs {
			ins = append(ins, &input{Rel: in.Path, Size: in.Size, Rows: in.Rows, FirstRow: in.FirstRow, GroupRows: in.GroupRows})
			sums = append(sums, in.Checksum)
		}
	}
	return lin, sums, ins
}

// external makes the merge of the shard's pieces: the table of the
// unified schema with the shard's series, the attribute choice over every
// series of every part, and one run per piece run with its codes mapped.
func (s *splitSet) external(opt Options, ins []*input) (*external, error) {
	metas := make([]*partMeta, len(s.heads))
	var fields []arrow.Field
	for j, h := range s.heads {
		path := filepath.Join(s.dir, filepath.FromSlash(h.Meta.Path))
		m, f, err := readPartMeta(path, h.Meta)
		if err != nil {
			return nil, fmt.Errorf("piece %s: %w", filepath.Join(s.dir, pieceName(SplitPart{Index: h.Part, Count: h.Parts})+headExt), err)
		}
		s.bytesRead += h.Meta.Size
		if j == 0 {
			fields = f
		} else if !sameFields(fields, f) {
			return nil, fmt.Errorf("%s: its schema differs from part 0's: pieces of two splits", path)
		}
		metas[j] = m
	}
	t := &table{inputs: ins, periodCol: opt.PeriodColumn}
	u := &Unified{}
	for _, f := range fields {
		u.Columns = append(u.Columns, Column{Name: f.Name, Type: f.Type})
	}
	t.unified = u
	for _, c := range u.Columns {
		st := newStore(c, 0, nil)
		switch c.Name {
		case opt.SeriesColumn:
			t.series = st
		case opt.ValueColumn:
			t.value = st
		case opt.PeriodColumn:
		default:
			t.others = append(t.others, st)
		}
	}
	if t.series == nil || t.value == nil || t.series.kind != kindString {
		return nil, fmt.Errorf("split %s: the pieces' schema lacks the series or value column", s.dir)
	}
	for _, m := range metas {
		if len(m.IsAttr) != len(t.others) {
			return nil, fmt.Errorf("split %s: a meta file names %d other columns, the schema %d", s.dir, len(m.IsAttr), len(t.others))
		}
	}
	if recordSize(t) != s.heads[0].RecordSize {
		return nil, fmt.Errorf("split %s: records of %d bytes, the schema makes %d", s.dir, s.heads[0].RecordSize, recordSize(t))
	}
	isAttr := chooseAttrs(t, metas)
	e := &external{t: t, opt: opt, isAttr: isAttr}
	for _, st := range t.others {
		e.firsts = append(e.firsts, st.like())
	}
	// Map every part's codes to the build's dictionaries: the string
	// columns of the merge's records (those not attributes).
	ml := layoutOf(t, isAttr)
	offsets := stringOffsets(t, ml)
	for j, m := range metas {
		h := s.heads[j]
		headPath := filepath.Join(s.dir, pieceName(SplitPart{Index: h.Part, Count: h.Parts})+headExt)
		rm := &codeRemap{series: make([]uint32, len(m.SeriesIDs)), offsets: offsets}
		var ids []string
		var at []uint32
		for c, id := range m.SeriesIDs {
			rm.series[c] = noRow
			if c < len(m.Seen) && m.Seen[c] && opt.Shard.Of(id) == opt.Shard.Index {
				ids, at = append(ids, id), append(at, uint32(c))
			}
		}
		codes := make([]uint32, len(ids))
		if err := t.series.dict.internLocal(ids, codes); err != nil {
			return nil, err
		}
		for k, c := range at {
			rm.series[c] = codes[k]
		}
		strs := make([][]uint32, len(t.others))
		for i, st := range t.others {
			if st.kind != kindString {
				continue
			}
			strs[i] = make([]uint32, len(m.Strings[i]))
			if err := st.dict.internLocal(m.Strings[i], strs[i]); err != nil {
				return nil, err
			}
			if ml.offs[i] >= 0 {
				rm.strings = append(rm.strings, strs[i])
			}
		}
		fills := partFills(t, m)
		e.noteFirsts(m, at, codes, strs)
		name := filepath.Join(s.dir, h.Piece.Path)
		if fi, err := os.Stat(name); err != nil {
			return nil, fmt.Errorf("piece %s: %w", name, err)
		} else if fi.Size() != h.Piece.Size {
			return nil, fmt.Errorf("piece %s is %d bytes, its manifest says %d: written by another split, or damaged", name, fi.Size(), h.Piece.Size)
		}
		for k, r := range h.Runs {
			omit, err := r.omitOf(t)
			if err != nil {
				return nil, fmt.Errorf("piece %s run %d: %w", headPath, k, err)
			}
			e.runs = append(e.runs, runSource{path: name, name: fmt.Sprintf("piece %s run %d", name, k),
				off: r.Offset, size: r.Bytes, blocks: true, remap: rm, records: r.Records, omit: omit, fills: fills})
			t.rows += int(r.Records)
		}
		s.bytesRead += h.Piece.Size
	}
	n := len(t.series.dict.values)
	e.seen = make([]bool, n)
	for c := range e.seen {
		e.seen[c] = true
	}
	return e, nil
}

func sameFields(a, b []arrow.Field) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !arrow.TypeEqual(a[i].Type, b[i].Type) {
			return false
		}
	}
	return true
}

// stringOffsets are the offsets of the other string columns in records
// of layout l.
func stringOffsets(t *table, l recLayout) []int {
	var offs []int
	for i, st := range t.others {
		if st.kind == kindString && l.offs[i] >= 0 {
			offs = append(offs, l.offs[i])
		}
	}
	return offs
}

// omitOf checks the run's list of the columns its records leave out
// against t's schema and record size, as t.others flags.
func (r pieceRun) omitOf(t *table) ([]bool, error) {
	omit := make([]bool, len(t.others))
	for k, i := range r.Omit {
		if i < 0 || i >= len(omit) || (k > 0 && i <= r.Omit[k-1]) {
			return nil, fmt.Errorf("leaves out columns %v: want increasing indexes below %d", r.Omit, len(omit))
		}
		omit[i] = true
	}
	if n := layoutOf(t, omit).size; n != r.RecordSize {
		return nil, fmt.Errorf("records of %d bytes, the schema without the columns it leaves out makes %d", r.RecordSize, n)
	}
	return omit, nil
}

// partFills are a part's first values per column, by the part's series
// code, as stores: what its runs' records leave out.
func partFills(t *table, m *partMeta) []*store {
	fills := make([]*store, len(t.others))
	for i, st := range t.others {
		f := m.Firsts[i]
		fills[i] = &store{col: st.col, kind: st.kind, width: st.width, codes: f.Codes, data: f.Data, valid: f.Valid}
	}
	return fills
}

// chooseAttrs decides which other columns are attributes over every
// series of every part: a column is one when each part found it constant
// within each of its series and every series' first value is the same in
// every part that read it (what the in-memory build finds in one pass).
func chooseAttrs(t *table, metas []*partMeta) []bool {
	isAttr := make([]bool, len(t.others))
	for i := range isAttr {
		isAttr[i] = true
		for _, m := range metas {
			isAttr[i] = isAttr[i] && m.IsAttr[i]
		}
	}
	type at struct {
		part int
		code uint32
	}
	first := make(map[string]at)
	for j, m := range metas {
		for c, id := range m.SeriesIDs {
			if c >= len(m.Seen) || !m.Seen[c] {
				continue
			}
			p, ok := first[id]
			if !ok {
				first[id] = at{j, uint32(c)}
				continue
			}
			for i, st := range t.others {
				if isAttr[i] && !sameFirst(st, metas[p.part], int(p.code), m, c, i) {
					isAttr[i] = false
				}
			}
		}
	}
	return isAttr
}

// sameFirst compares column i's first value of series a in part ma with
// that of series b in part mb (nulls equal).
func sameFirst(st *store, ma *partMeta, a int, mb *partMeta, b int, i int) bool {
	fa, fb := ma.Firsts[i], mb.Firsts[i]
	switch st.kind {
	case kindString:
		ca, cb := fa.Codes[a], fb.Codes[b]
		if ca == nullCode || cb == nullCode {
			return ca == cb
		}
		return ma.Strings[i][ca] == mb.Strings[i][cb]
	case kindFixed, kindBool:
		if fa.Valid[a] != fb.Valid[b] {
			return false
		}
		w := st.width
		return string(fa.Data[a*w:(a+1)*w]) == string(fb.Data[b*w:(b+1)*w])
	}
	return true
}

// noteFirsts records, for the shard's series a part read first, their
// first value of every attribute column: part codes at became the
// build's codes; strs maps the part's string codes.
func (e *external) noteFirsts(m *partMeta, at, codes []uint32, strs [][]uint32) {
	n := len(e.t.series.dict.values)
	for i, f := range e.firsts {
		if !e.isAttr[i] {
			continue
		}
		f.grow(n)
		src := m.Firsts[i]
		for k, pc := range at {
			c := codes[k]
			if len(e.seen) > int(c) && e.seen[c] {
				continue
			}
			switch f.kind {
			case kindString:
				v := src.Codes[pc]
				if v != nullCode {
					v = strs[i][v]
				}
				f.codes[c] = v
			case kindFixed, kindBool:
				w := f.width
				f.valid[c] = src.Valid[pc]
				copy(f.data[int(c)*w:(int(c)+1)*w], src.Data[int(pc)*w:(int(pc)+1)*w])
			}
		}
	}
	for len(e.seen) < n {
		e.seen = append(e.seen, false)
	}
	for _, c := range codes {
		e.seen[c] = true
	}
}

// sortFromSplit merges the shard's pieces into the staging directory.
func (r *builder) sortFromSplit(ctx context.Context, t *table, e *external) (*built, error) {
	r.opt.onPhase("read")
	if err := r.stage(ctx); err != nil {
		return nil, err
	}
	e.budget = t.budget
	old := debug.SetMemoryLimit(e.limitFor(spillSlack)) // the merge sets it from what it holds
	res, err := e.merge(ctx, r.staged, r.rep)
	debug.SetMemoryLimit(old)
	if err := r.checkMerged(ctx, t, res, err); err != nil {
		return nil, err
	}
	r.phase(&r.sum.Phases.Write)
	r.sum.Runs = len(e.runs)
	b := res.built
	for _, h := range r.split.heads {
		b.otherShards += h.PartRows - h.Rows
	}
	return &b, nil
}

// scanSplit opens the shard's pieces in place of the lake: the lineage,
// the input files' checksums, and the merge of its runs.
func (r *builder) scanSplit() (*table, *external, error) {
	r.opt.onPhase("scan")
	s, err := openSplit(r.opt)
	if err != nil {
		return nil, nil, err
	}
	r.split = s
	lin, sums, ins := s.lineage()
	e, err := s.external(r.opt, ins)
	if err != nil {
		return nil, nil, err
	}
	t := e.t
	t.budget, _ = planMemory(t.unified, 0, r.opt.MemoryLimit)
	if t.budget <= 0 {
		t.budget = 1 << 30
	}
	t.external = true
	r.lin, r.sums = lin, sums
	r.sum.Lineage = lin
	r.sum.MemoryBudget, r.sum.External = t.budget, true
	r.phase(&r.sum.Phases.Scan)
	// As a shard build of the lake: the table's rows count, not the shard's.
	if err := checkEmpty(s.heads[0].TableRows, len(ins), strings.TrimSuffix(lin.Source, "/"), r.opt); err != nil {
		return nil, nil, err
	}
	return t, e, nil
}
