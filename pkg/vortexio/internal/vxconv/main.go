// Command vxconv converts an Arrow IPC file to a Vortex file with
// vortexio.Writer, or (when IN ends in .vortex) a Vortex file to an Arrow
// IPC file with vortexio's reader. The Python interop tests (tests/vortex)
// use it to drive our writer and reader; it is not a user-facing tool
// (snapbuild convert is).
//
//	vxconv IN.arrow OUT.vortex [CHUNK_ROWS]
//	vxconv IN.vortex OUT.arrow
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/energyscope/servingsnap/pkg/vortexio"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "vxconv:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("usage: vxconv IN.arrow OUT.vortex [CHUNK_ROWS [ZONE_ROWS]]")
	}
	if strings.HasSuffix(args[0], ".vortex") {
		return toArrow(args[0], args[1])
	}
	chunk := 0
	if len(args) > 2 {
		n, err := strconv.Atoi(args[2])
		if err != nil {
			return err
		}
		chunk = n
	}
	zones := 0
	if len(args) > 3 {
		n, err := strconv.Atoi(args[3])
		if err != nil {
			return err
		}
		zones = n
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
	out, err := os.Create(args[1])
	if err != nil {
		return err
	}
	w, err := vortexio.NewWriter(out, r.Schema(), vortexio.WriterOptions{ChunkRows: chunk, ZoneRows: zones})
	if err != nil {
		return err
	}
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.RecordBatch(i)
		if err != nil {
			return err
		}
		if err := w.Write(rec); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return out.Close()
}

func toArrow(in, outPath string) error {
	f, err := vortexio.OpenFile(in)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := f.NewReader(nil, 0)
	if err != nil {
		return err
	}
	out, err := os.Create(outPath)
	if err != nil {
		return err
	}
	w, err := ipc.NewFileWriter(out, ipc.WithSchema(r.Schema()))
	if err != nil {
		return err
	}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		err = w.Write(rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return out.Close()
}
