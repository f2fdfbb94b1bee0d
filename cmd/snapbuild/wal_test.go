package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/snapshot"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// logWrites appends one record per id list to the dataset's log, each a
// normalized write (as DoPut logs them) of those ids at day 20000, with
// no check of what they hold; it returns the records' positions.
func logWrites(t *testing.T, ds string, writes ...[]string) []wal.Position {
	t.Helper()
	snap, err := snapshot.Open(ds, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fields, _ := snap.Index().Attributes()
	s, err := livedelta.NewSchema(snap.Schema(), fields)
	snap.Close()
	if err != nil {
		t.Fatal(err)
	}
	l, err := wal.Open(filepath.Join(ds, dataset.WALDir), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var pos []wal.Position
	for _, ids := range writes {
		b := array.NewRecordBuilder(memory.DefaultAllocator, s.Write)
		for _, id := range ids {
			for i, f := range s.Write.Fields() {
				switch {
				case i == 0:
					b.Field(i).(*array.StringBuilder).Append(id)
				case i == 1:
					b.Field(i).(*array.Date32Builder).Append(arrow.Date32(20000))
				case f.Name == livedelta.ColGiven:
					b.Field(i).(*array.BooleanBuilder).Append(false)
				default:
					b.Field(i).AppendNull()
				}
			}
		}
		rec := b.NewRecordBatch()
		b.Release()
		var buf bytes.Buffer
		w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		w.Close()
		rec.Release()
		p, err := l.Append(context.Background(), buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, p)
	}
	return pos
}

// TestWALCommands: ls, verify, dump and salvage on a log holding a record
// a replay refuses (an empty id, written with a valid checksum) and then
// a flipped byte: verify exits 1 naming each, salvage sets exactly that
// record aside and says what it held, and verify then exits 0.
func TestWALCommands(t *testing.T) {
	root := t.TempDir()
	_, ds := testsnap.Sample(t, root, "SYN", 5, 1, nil)
	snap, err := snapshot.Open(ds, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := snap.Index().SeriesID(0), snap.Index().SeriesID(1)
	snap.Close()
	pos := logWrites(t, ds, []string{a}, []string{a, b}, []string{b}, []string{""}, []string{a})

	code, out, errOut := snapbuild("wal", "verify", ds)
	if code != 1 || !strings.Contains(out, "record at "+pos[3].String()) || !strings.Contains(out, "empty series id") ||
		!strings.Contains(out, "snapbuild wal salvage --quarantine "+pos[3].String()) {
		t.Fatalf("verify over a hostile record: exit %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = snapbuild("wal", "ls", "--json", ds)
	var rep struct {
		Records  int
		Pending  int   `json:"pending_records"`
		Rows     int64 `json:"pending_rows"`
		Problems []string
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Records != 5 || rep.Pending != 5 || rep.Rows != 6 || len(rep.Problems) != 1 {
		t.Fatalf("ls --json: exit %d %+v\n%s%s", code, rep, out, errOut)
	}

	code, out, _ = snapbuild("wal", "dump", "--json", ds)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 5 || !strings.Contains(lines[3], `"problem"`) || strings.Contains(lines[2], `"problem"`) || !strings.Contains(lines[1], `"series":["`+a+`","`+b+`"]`) && !strings.Contains(lines[1], `"series":["`+b+`","`+a+`"]`) {
		t.Fatalf("dump --json: exit %d\n%s", code, out)
	}

	code, out, errOut = snapbuild("wal", "salvage", "--quarantine", pos[3].String(), ds)
	if code != 0 || !strings.Contains(out, "kept 3 records before the damage and 1 after it") || !strings.Contains(out, "1 rows of ,") && !strings.Contains(out, "1 rows of ") {
		t.Fatalf("salvage of the hostile record: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut = snapbuild("wal", "verify", ds); code != 0 || !strings.Contains(out, "OK  4 records") {
		t.Fatalf("verify after salvage: exit %d\n%s%s", code, out, errOut)
	}

	// A flipped byte in the second record's payload: found by its
	// segment, salvaged by segment alone.
	seg := filepath.Join(ds, dataset.WALDir, "00000001.wal")
	raw, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	raw[pos[1].Offset-5] ^= 0x10
	if err := os.WriteFile(seg, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ = snapbuild("wal", "verify", ds); code != 1 || !strings.Contains(out, "segment 00000001.wal") {
		t.Fatalf("verify over a flipped byte: exit %d\n%s", code, out)
	}
	code, out, errOut = snapbuild("wal", "salvage", "--quarantine", "00000001", "--json", ds)
	var sv struct {
		Before int `json:"kept_before"`
		After  int `json:"kept_after"`
		Lost   []struct{ Readable bool }
	}
	if code != 0 || json.Unmarshal([]byte(out), &sv) != nil || sv.Before != 1 || sv.After != 2 || len(sv.Lost) != 1 {
		t.Fatalf("salvage of a flipped byte: exit %d %+v\n%s%s", code, sv, out, errOut)
	}
	if code, out, _ = snapbuild("wal", "verify", ds); code != 0 || !strings.Contains(out, "OK  3 records") {
		t.Fatalf("verify after the second salvage: exit %d\n%s", code, out)
	}

	// usage errors
	if code, _, errOut = snapbuild("wal", "salvage", "--quarantine", "x:y", ds); code != 2 || !strings.Contains(errOut, "want SEGMENT[:OFFSET]") {
		t.Errorf("bad --quarantine: exit %d %s", code, errOut)
	}
	if code, _, errOut = snapbuild("wal", "salvage", "--quarantine", "00000001", ds); code != 1 || !strings.Contains(errOut, "no damage found") {
		t.Errorf("salvage of a sound segment: exit %d %s", code, errOut)
	}
}
