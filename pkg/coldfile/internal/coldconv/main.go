// Command coldconv writes the cold tier of a snapshot's data file with
// pkg/coldfile: for every series, all rows but the last HOT_ROWS go to
// OUT.vortex, one series at a time, chunks cut at series boundaries. It
// prints one JSON object per series with rows in the cold file
// ({"code", "start", "rows"}). The interop tests (tests/vortex) use it to
// check that vortex-data reads a cold file into the snapshot's rows; it is
// not a user-facing tool.
//
//	coldconv DATA.arrow OUT.vortex HOT_ROWS [CHUNK_ROWS]
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/datafile"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "coldconv:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 3 {
		return fmt.Errorf("usage: coldconv DATA.arrow OUT.vortex HOT_ROWS [CHUNK_ROWS]")
	}
	hot, err := strconv.ParseInt(args[2], 10, 64)
	if err != nil || hot < 1 {
		return fmt.Errorf("HOT_ROWS %q: want a positive integer", args[2])
	}
	chunk := 0
	if len(args) > 3 {
		if chunk, err = strconv.Atoi(args[3]); err != nil {
			return err
		}
	}
	in, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer in.Close()
	r, err := ipc.NewFileReader(in)
	if err != nil {
		return err
	}
	defer r.Close()
	w, err := coldfile.Create(args[1], r.Schema(), coldfile.Options{ChunkRows: chunk})
	if err != nil {
		return err
	}
	defer w.Abort()
	pol := coldfile.Policy{HotRows: hot}
	enc := json.NewEncoder(os.Stdout)
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.RecordBatchAt(i)
		if err != nil {
			return err
		}
		codes := rec.Column(datafile.ColumnSeriesCode).(*array.Uint32).Uint32Values()
		periods := rec.Column(datafile.ColumnPeriod).(*array.Date32).Date32Values()
		lo := 0
		for k := 1; k <= len(codes); k++ {
			if k < len(codes) && codes[k] == codes[lo] {
				continue
			}
			c := pol.ColdRows(periods[lo:k])
			loc, err := w.Add(rec, int64(lo), int64(lo)+c)
			if err != nil {
				return err
			}
			if err := enc.Encode(map[string]int64{"code": int64(codes[lo]), "start": loc.Start, "rows": loc.Rows}); err != nil {
				return err
			}
			lo = k
		}
	}
	_, err = w.Close()
	return err
}
