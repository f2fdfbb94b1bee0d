package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/live"
	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/snapshot"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// walCommand is "snapbuild wal ACTION ROOT/DATASET": look at, verify and
// repair a dataset's write-ahead log (docs/OPERATIONS.md "When the log is
// damaged"). The action is a word rather than a subcommand, so flags may
// go anywhere on the line, as with every other command.
func walCommand() *cli.Command {
	return &cli.Command{
		Name:      "wal",
		Usage:     "list, verify, dump and salvage a dataset's write-ahead log",
		ArgsUsage: "ls|verify|dump|salvage ROOT/DATASET",
		Description: `The live writes of a dataset are in ROOT/DATASET/wal/ (docs/FORMAT.md §6). These
actions read it as a server's replay would: every record after the log's
checkpoint is decoded and checked as a DoPut batch is.

   ls       segments: size, records, rows, positions, folded or not, damage
   verify   exit 0 when a server's replay would succeed, 1 naming what stops it
   dump     every record: position, folded, rows, series, periods, and why a
            replay refuses it (--json: one object a line)
   salvage  --quarantine SEGMENT[:OFFSET]: set a damaged part of a segment
            aside, keeping every readable record before and after it

ls, verify and dump take no lock and change nothing (a running server is not
disturbed); salvage needs the log's lock: stop the server first.

salvage --quarantine SEGMENT finds the damage in that segment (a number, or its
file name) and drops it; SEGMENT:OFFSET names a record by the position a
replay error or "wal dump" printed, to drop it although its checksums hold (a
record a replay refused for what it holds). Every intact record before and
after is kept, in order; the original segment is kept whole as
NNNNNNNN.wal.corrupt in wal/. It prints exactly what was lost: the byte ranges
and, where the bytes still decode, the series and periods they held
(unvouched: their checksum failed).

Examples:
   snapbuild wal ls snapshots/PET
   snapbuild wal verify snapshots/PET && echo replayable
   snapbuild wal dump --json snapshots/PET | head
   snapbuild wal salvage --quarantine 00000003:1048712 snapshots/PET`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print JSON (dump: one object a line)"},
			&cli.StringFlag{Name: "quarantine", Usage: "salvage: the segment (and record position) to salvage, SEGMENT[:OFFSET]"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cliutil.Usagef("wal takes two arguments, the action (ls, verify, dump, salvage) and ROOT/DATASET (see snapbuild wal --help)")
			}
			action := c.Args().First()
			if action != "salvage" && c.IsSet("quarantine") {
				return cliutil.Usagef("wal %s: --quarantine is salvage's (see snapbuild wal --help)", action)
			}
			ds := c.Args().Get(1)
			switch action {
			case "ls":
				rep, err := checkLog(ds, nil)
				if err != nil {
					return err
				}
				if c.Bool("json") {
					return writeJSON(c.App.Writer, rep)
				}
				return writeLogReport(c.App.Writer, rep)
			case "verify":
				return verifyAction(c, ds)
			case "dump":
				return dumpAction(c, ds)
			case "salvage":
				return salvageAction(c, ds)
			}
			return cliutil.Usagef("wal: unknown action %q: want ls, verify, dump or salvage (see snapbuild wal --help)", action)
		},
	}
}

func verifyAction(c *cli.Context, ds string) error {
	rep, err := checkLog(ds, nil)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if err := writeJSON(c.App.Writer, map[string]any{"ok": rep.OK(), "report": rep}); err != nil {
			return err
		}
	} else {
		for _, p := range rep.Problems {
			fmt.Fprintln(c.App.Writer, "PROBLEM  "+p)
		}
		if rep.OK() {
			fmt.Fprintf(c.App.Writer, "OK  %d records, %d after the checkpoint %s (%s rows)\n", rep.Records, rep.Pending, rep.Checkpoint, cliutil.Count(rep.Rows))
		}
	}
	if !rep.OK() {
		return cli.Exit("", 1)
	}
	return nil
}

func dumpAction(c *cli.Context, ds string) error {
	enc := json.NewEncoder(c.App.Writer)
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	if !c.Bool("json") {
		fmt.Fprintln(tw, "position\tfolded\trows\tseries\tperiods\tproblem")
	}
	_, err := checkLog(ds, func(ri live.RecordInfo) error {
		if c.Bool("json") {
			return enc.Encode(ri)
		}
		fmt.Fprintf(tw, "%s\t%v\t%d\t%s\t%s..%s\t%s\n", ri.Position, ri.Folded, ri.Rows, seriesText(ri.Series), ri.FirstPeriod, ri.LastPeriod, ri.Problem)
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Flush()
}

// logTarget is what the wal commands read: the dataset's log directory,
// its write schema (from the snapshot CURRENT names) and checkpoint.
func logTarget(ds string) (dir string, s *livedelta.Schema, folded wal.Position, err error) {
	d, err := dataset.Open(ds)
	if err != nil {
		return "", nil, wal.Position{}, err
	}
	if err := d.CheckExists(); err != nil {
		return "", nil, wal.Position{}, err
	}
	dir = filepath.Join(d.Dir, dataset.WALDir)
	snap, err := snapshot.Open(d.Dir, snapshot.Options{})
	if err != nil {
		return "", nil, wal.Position{}, fmt.Errorf("wal: the snapshot CURRENT names gives the log's schema: %w", err)
	}
	defer snap.Close()
	fields, _ := snap.Index().Attributes()
	if s, err = livedelta.NewSchema(snap.Schema(), fields); err != nil {
		return "", nil, wal.Position{}, err
	}
	cp, err := d.WALCheckpoint()
	if err != nil {
		return "", nil, wal.Position{}, err
	}
	return dir, s, wal.PositionFromUint64(cp.Folded), nil
}

func checkLog(ds string, each func(live.RecordInfo) error) (live.LogReport, error) {
	dir, s, folded, err := logTarget(ds)
	if err != nil {
		return live.LogReport{}, err
	}
	rep, err := live.CheckLog(dir, s, folded, each)
	if err != nil {
		return rep, fmt.Errorf("wal %s: %w", dir, err)
	}
	return rep, nil
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func writeLogReport(w io.Writer, rep live.LogReport) error {
	fmt.Fprintf(w, "checkpoint %s: %d records, %d after it (%s rows) replayed at start-up\n", rep.Checkpoint, rep.Records, rep.Pending, cliutil.Count(rep.Rows))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "segment\tsize\trecords\trows\tfirst\tend\tfolded\t")
	for _, s := range rep.Segments {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%v\t\n", s.Name, cliutil.Bytes(s.Bytes), s.Records, cliutil.Count(s.Rows), s.First, s.End, s.Folded)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range rep.Segments {
		if s.Problem != "" {
			fmt.Fprintf(w, "%s: %s\n", s.Name, s.Problem)
		}
	}
	for _, p := range rep.Problems {
		fmt.Fprintln(w, "PROBLEM  "+p)
	}
	return nil
}

// seriesText lists up to three series ids, an empty or odd one quoted.
func seriesText(ids []string) string {
	show := make([]string, 0, 3)
	for _, id := range ids[:min(3, len(ids))] {
		if id == "" || strings.ContainsAny(id, ", \t\n") || !utf8.ValidString(id) {
			id = strconv.Quote(id)
		}
		show = append(show, id)
	}
	if len(ids) <= 3 {
		return strings.Join(show, ",")
	}
	return fmt.Sprintf("%s,… (%d)", strings.Join(show, ","), len(ids))
}

// parseQuarantine reads SEGMENT[:OFFSET]: a segment number or file name,
// and a record's position within it.
func parseQuarantine(v string) (seg uint32, off uint32, err error) {
	sv, ov, hasOff := strings.Cut(v, ":")
	sv = strings.TrimSuffix(filepath.Base(sv), ".wal")
	n, err := strconv.ParseUint(sv, 10, 32)
	if err != nil || n == 0 {
		return 0, 0, cliutil.Usagef("--quarantine %q: want SEGMENT[:OFFSET], e.g. 00000003 or 00000003:1048712", v)
	}
	if hasOff {
		o, err := strconv.ParseUint(ov, 10, 32)
		if err != nil || o == 0 {
			return 0, 0, cliutil.Usagef("--quarantine %q: the offset is a record's position within the segment, e.g. 00000003:1048712", v)
		}
		off = uint32(o)
	}
	return uint32(n), off, nil
}

func salvageAction(c *cli.Context, ds string) error {
	if !c.IsSet("quarantine") {
		return cliutil.Usagef("wal salvage: missing --quarantine SEGMENT[:OFFSET] (see snapbuild wal --help)")
	}
	seg, off, err := parseQuarantine(c.String("quarantine"))
	if err != nil {
		return err
	}
	dir, s, folded, err := logTarget(ds)
	if err != nil {
		return err
	}
	res, err := wal.Salvage(dir, seg, off, folded)
	if err != nil {
		return fmt.Errorf("wal salvage: %w", err)
	}
	type lost struct {
		From     string   `json:"from"`
		To       string   `json:"to"`
		Bytes    uint32   `json:"bytes"`
		Readable bool     `json:"readable"` // the bytes still decode
		Vouched  bool     `json:"vouched"`  // their checksums held (the record named, which a replay refused)
		Rows     int64    `json:"rows,omitempty"`
		Series   []string `json:"series,omitempty"`
		Periods  string   `json:"periods,omitempty"`
	}
	var losts []lost
	for _, l := range res.Lost {
		x := lost{From: wal.Position{Segment: seg, Offset: l.From}.String(), To: wal.Position{Segment: seg, Offset: l.To}.String(), Bytes: l.To - l.From, Vouched: l.Named}
		if l.Header {
			if ri, ok := live.Unvouched(l.Payload, s); ok {
				x.Readable, x.Rows, x.Series, x.Periods = true, ri.Rows, ri.Series, ri.FirstPeriod+".."+ri.LastPeriod
			}
		}
		losts = append(losts, x)
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, map[string]any{"segment": fmt.Sprintf("%08d.wal", seg), "aside": res.Aside,
			"kept_before": res.Before, "kept_after": res.After, "lost_bytes": res.LostBytes(), "lost": losts})
	}
	w := c.App.Writer
	fmt.Fprintf(w, "salvaged %08d.wal: kept %d records before the damage and %d after it; %d bytes lost; the original is wal/%s\n",
		seg, res.Before, res.After, res.LostBytes(), res.Aside)
	for _, l := range losts {
		fmt.Fprintf(w, "  lost %s .. %s (%d bytes)", l.From, l.To, l.Bytes)
		switch {
		case l.Readable && l.Vouched:
			fmt.Fprintf(w, ": %d rows of %s, periods %s (the record named: its checksums held)", l.Rows, seriesText(l.Series), l.Periods)
		case l.Readable:
			fmt.Fprintf(w, ": %d rows of %s, periods %s (unvouched: the checksum failed)", l.Rows, seriesText(l.Series), l.Periods)
		default:
			fmt.Fprint(w, ": unreadable")
		}
		fmt.Fprintln(w)
	}
	return nil
}
