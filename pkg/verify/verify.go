// Package verify proves that a published snapshot is intact: that CURRENT,
// the manifest, the data file and the index sidecar say what docs/FORMAT.md
// says they must, and, on request, that the snapshot holds exactly the rows
// of the lake it was built from. It is the logic behind `snapverify`.
//
// Why a package of its own: the read side (pkg/snapshot) validates what a
// server needs before it serves (checksums, footers, schemas) and stops at
// the first problem, because a server only needs to know whether it may
// open a snapshot. Verification asks a different question — what exactly is
// wrong, and where — so it keeps going after the first problem and returns
// every finding, names the file and location of each, and runs the
// O(rows) structural proofs (sort order, index/data agreement, statistics,
// lake equivalence) that no reader should pay for at open. Keeping them
// here keeps the read side small and lets snapverify, tests, and a future
// server "verify on reload" action share one implementation.
//
// Three levels, each including the previous:
//
//   - fast (always): CURRENT, manifest rules, every file's size and
//     checksum, and snapshot.Open with VerifyData (footers, schemas, batch
//     and row counts), plus the cheap checks Open does not make.
//   - deep (Options.Deep): every row of the data file against the sort
//     order, the index and the manifest statistics.
//   - against (Options.Against): the input (a Parquet folder, a Delta or
//     an Iceberg table) is read again, alongside the deep checks, and
//     compared series by series with an order-independent hash
//     (lakeread.go: by index code, without sorting the input).
//
// Verify returns an error only when it could not verify at all (no such
// dataset directory, an unreadable root, an unknown --snapshot, an
// unreadable input lake). Everything wrong with the dataset itself is a
// Finding.
package verify

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/snapshot"

	"github.com/energyscope/servingsnap/pkg/progress"
)

// Check names, as they appear in Finding.Check and docs/CLI.md.
const (
	// Fast checks.
	CheckCurrent       = "current"        // CURRENT parses and names an existing manifest
	CheckManifest      = "manifest"       // manifest parses, known version, names this dataset and id
	CheckManifestRules = "manifest-rules" // FORMAT.md rules manifest.Parse does not enforce
	CheckFiles         = "files"          // every file exists with its recorded size
	CheckChecksum      = "checksum"       // every file's xxh64 equals the manifest's
	CheckOpen          = "open"           // snapshot.Open with VerifyData accepts the snapshot
	CheckArrow         = "arrow"          // Arrow IPC magic, batch counts
	CheckStructure     = "structure"      // every buffer, offset and dictionary index of the index and data batches in bounds
	CheckSchema        = "schema"         // attributes and columns agree with the manifest
	CheckStats         = "stats"          // manifest statistics agree with the index (fast) and the data (deep)

	// Deep checks.
	CheckSort       = "sort"        // rows strictly increasing by (series, period)
	CheckSeriesCode = "series-code" // series_code in range, one contiguous run per series
	CheckIndex      = "index"       // index rows agree with the data
	CheckBatches    = "batches"     // batches cut at series boundaries, within batch_rows
	CheckTypes      = "types"       // value column type = latest_value type
	// CheckPortable: portable.parquet starts and ends with the Parquet
	// magic (fast); its rows equal the snapshot's, row groups in series
	// order (deep).
	CheckPortable = "portable"
	// CheckCold: a tiered snapshot's cold tier (cold.vortex, FORMAT.md
	// §9): its chunks against the manifest and the index's tier columns
	// on their own (fast); every cold row against the index (deep).
	CheckCold = "cold"

	// Lake comparison.
	CheckAgainst = "against"

	// CheckShardMembership: the one check a whole sharded dataset adds to
	// its shards' own (VerifyWhole): every series of shard i hashes to i
	// (docs/FORMAT.md, Shard map), so no series is served by two shards or
	// looked for in the wrong one.
	CheckShardMembership = "shard-membership"

	// CheckPanic reports a panic while reading a file: the last line of
	// defence (the checks above should have caught what caused it).
	CheckPanic = "panic"
)

// Report statuses: what the findings say about the snapshot.
const (
	StatusIntact = "intact" // no finding
	// StatusDiffers: the snapshot is intact but its rows differ from the
	// input Options.Against names (every finding is CheckAgainst). A
	// difference is not damage: the lake may have moved on, or the
	// snapshot may fold in live writes (a compaction).
	StatusDiffers = "differs"
	StatusCorrupt = "corrupt" // at least one finding of the snapshot itself
)

// DefaultMaxFindings bounds a report: past it verification stops and says so.
const DefaultMaxFindings = 100

// Options select what Verify checks.
type Options struct {
	// SnapshotID verifies that vintage instead of the one CURRENT names;
	// CURRENT is then not consulted. 0 means CURRENT.
	SnapshotID uint64
	// Deep adds the O(rows) structural checks.
	Deep bool
	// Against is an input to compare the snapshot's rows with ("" for
	// none): a folder of Parquet files, or a Delta or Iceberg table
	// directory (pkg/lake/source). It is read with the manifest's build
	// options.
	Against string
	// MaxFindings stops verification after that many findings (0:
	// DefaultMaxFindings, negative: no limit).
	MaxFindings int
	// Parallel is the number of workers reading the input for Against
	// (row groups of a Parquet folder, data files of a table), besides
	// the deep checks, which run alongside them (0: GOMAXPROCS).
	Parallel int
	// Progress receives the rows and bytes of the input lake re-read by
	// Against (nil: none).
	Progress progress.Reporter
}

// Finding is one problem: which check found it, in which file (relative
// to the dataset directory, or an input file's path), where in that file,
// and what is wrong.
type Finding struct {
	Check    string `json:"check"`
	File     string `json:"file"`
	Location string `json:"location"`
	Message  string `json:"message"`
}

func (f Finding) String() string {
	var b strings.Builder
	if f.File != "" {
		b.WriteString(f.File)
		b.WriteString(": ")
	}
	if f.Location != "" {
		b.WriteString(f.Location)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "[%s] %s", f.Check, f.Message)
	return b.String()
}

// Report is the outcome of Verify. Its JSON form is what `snapverify
// --json` prints; field names are documented in docs/CLI.md.
type Report struct {
	Dir        string `json:"dir"`         // the dataset directory as given
	Dataset    string `json:"dataset"`     // the dataset name
	SnapshotID uint64 `json:"snapshot_id"` // the snapshot verified; 0 if CURRENT named none
	Manifest   string `json:"manifest"`    // its manifest, relative to Dir; "" if unknown
	Level      string `json:"level"`       // "fast" or "deep"
	Against    string `json:"against"`     // the input lake compared with; "" for none

	OK        bool      `json:"ok"`        // no findings
	Status    string    `json:"status"`    // StatusIntact, StatusDiffers or StatusCorrupt
	Opens     bool      `json:"opens"`     // snapshot.Open with VerifyData accepts it
	Checks    int       `json:"checks"`    // checks run (one per check and file)
	Findings  []Finding `json:"findings"`  // every problem found, in the order found
	Truncated bool      `json:"truncated"` // stopped at Options.MaxFindings
	Notes     []string  `json:"notes"`     // what was skipped and why; not problems

	Rows    int64 `json:"rows"`    // rows in both tiers (the manifest's count if it does not open)
	Series  int64 `json:"series"`  // series in the index (idem)
	Batches int   `json:"batches"` // data record batches (idem)
	// A tiered snapshot's cold tier (0 otherwise): rows in cold.vortex
	// (included in Rows) and its chunks.
	ColdRows   int64 `json:"cold_rows"`
	ColdChunks int   `json:"cold_chunks"`

	BytesChecksummed int64 `json:"bytes_checksummed"`
	InputFiles       int   `json:"input_files"`      // against: Parquet files read
	InputRows        int64 `json:"input_rows"`       // against: rows read, before duplicates
	InputSeries      int64 `json:"input_series"`     // against: distinct series in the input
	InputDuplicates  int64 `json:"input_duplicates"` // against: rows a later row shadows (on_duplicate=last)
	// InputOtherShardRows (against, a shard's snapshot): the input's rows
	// of series other shards hold, which the comparison leaves out
	InputOtherShardRows int64   `json:"input_other_shard_rows,omitempty"`
	Seconds             float64 `json:"seconds"`
}

// ErrCannotVerify wraps every error Verify returns: the verification could
// not be carried out (as opposed to finding the dataset corrupt).
var ErrCannotVerify = errors.New("cannot verify")

// verifier accumulates one report.
type verifier struct {
	ds  *dataset.Dir
	opt Options
	r   *Report
	max int

	m    *manifest.Manifest // parsed manifest, nil if unusable
	raw  []byte             // manifest bytes
	snap *snapshot.Snapshot // open snapshot, nil if Open refused
	cold *coldTier          // a tiered snapshot's cold file, once checkCold opened it
	at   string             // the file being read, for a panic's finding
}

// Verify checks the dataset directory dir (ROOT/DATASET) as opt says.
func Verify(dir string, opt Options) (*Report, error) {
	start := time.Now()
	ds, err := dataset.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCannotVerify, err)
	}
	v := &verifier{ds: ds, opt: opt, r: &Report{Dir: dir, Dataset: ds.Name, Level: "fast", Against: opt.Against, Findings: []Finding{}, Notes: []string{}}}
	if opt.Deep {
		v.r.Level = "deep"
	}
	switch {
	case opt.MaxFindings == 0:
		v.max = DefaultMaxFindings
	case opt.MaxFindings < 0:
		v.max = int(^uint(0) >> 1)
	default:
		v.max = opt.MaxFindings
	}
	defer func() {
		if v.snap != nil {
			v.snap.Close()
		}
		v.cold.close()
	}()
	if err := v.runGuarded(); err != nil {
		return nil, err
	}
	v.r.OK = len(v.r.Findings) == 0
	v.r.Status = statusOf(v.r.Findings)
	v.r.Seconds = time.Since(start).Seconds()
	return v.r, nil
}

// statusOf classes a report's findings: none, only differences from the
// input, or damage.
func statusOf(fs []Finding) string {
	status := StatusIntact
	for _, f := range fs {
		if f.Check != CheckAgainst {
			return StatusCorrupt
		}
		status = StatusDiffers
	}
	return status
}

// runGuarded is run with a panic turned into a finding naming the file
// being read. The checks are meant to make that impossible (structure
// before values); this keeps a missed case a finding with exit 1, never a
// crash with exit 2, and says where to look.
func (v *verifier) runGuarded() (err error) {
	defer func() {
		if r := recover(); r != nil {
			file := v.at
			if file == "" {
				file = v.r.Manifest
			}
			if file == "" {
				file = dataset.CurrentFile
			}
			v.r.Findings = append(v.r.Findings, Finding{Check: CheckPanic, File: file, Message: fmt.Sprintf("reading the file panicked (a malformed file the checks did not catch): %v", r)})
			err = nil
		}
	}()
	return v.run()
}

func (v *verifier) run() error {
	if err := v.checkDatasetDir(); err != nil {
		return err
	}
	if in := v.opt.Against; in != "" {
		// A missing input is a usage error whatever state the dataset is in.
		if st, err := os.Stat(in); err != nil || !st.IsDir() {
			return fmt.Errorf("%w: input %s is not a readable directory", ErrCannotVerify, in)
		}
	}
	id, err := v.selectSnapshot()
	if err != nil || id == 0 {
		return err
	}
	v.r.SnapshotID = id
	v.r.Manifest = dataset.ManifestPath(id)
	if !v.loadManifest(id) {
		return nil
	}
	v.checkManifestRules()
	intact := v.checkFiles()
	v.open(intact)
	why := "the snapshot does not open"
	if v.snap != nil && !v.checkStructure() {
		v.snap.Close()
		v.snap = nil
		why = "its Arrow buffers are malformed"
	}
	if v.snap == nil {
		if v.opt.Deep {
			v.note("deep checks skipped: " + why)
		}
		if v.opt.Against != "" {
			v.note("comparison with the input skipped: " + why)
		}
		return nil
	}
	v.checkOpened()
	if !v.full() {
		v.checkCold()
	}
	if v.snap.Tiered() && v.cold == nil {
		// The cold rows cannot be read: comparing the hot rows alone
		// with the index or the lake would only repeat that finding.
		if v.opt.Deep {
			v.note("deep checks skipped: the cold file cannot be read")
		}
		if v.opt.Against != "" {
			v.note("comparison with the input skipped: the cold file cannot be read")
		}
		return nil
	}
	// The lake is read on other goroutines while the snapshot's own
	// checks run: the two passes share nothing but the mapped index.
	var lake *lakeJob
	if v.opt.Against != "" && !v.full() {
		lake = v.startLake()
		defer lake.stop() // on every way out: the snapshot is closed after run
	}
	if v.opt.Deep && !v.full() {
		v.deep()
	}
	if !v.full() {
		v.checkPortable()
	}
	if v.opt.Against != "" {
		if v.full() {
			v.note("comparison with the input skipped: too many findings")
			return nil
		}
		return v.against(lake)
	}
	return nil
}

// add records a finding unless the report is full; it returns false once
// it is, so long loops can stop.
func (v *verifier) add(check, file, loc, format string, a ...any) bool {
	if len(v.r.Findings) >= v.max {
		v.truncate()
		return false
	}
	v.r.Findings = append(v.r.Findings, Finding{Check: check, File: file, Location: loc, Message: fmt.Sprintf(format, a...)})
	if len(v.r.Findings) >= v.max {
		v.truncate()
		return false
	}
	return true
}

func (v *verifier) truncate() {
	if !v.r.Truncated {
		v.r.Truncated = true
		v.note(fmt.Sprintf("stopped after %d findings; later checks did not run or were cut short", v.max))
	}
}

// full reports whether no more findings may be added.
func (v *verifier) full() bool { return len(v.r.Findings) >= v.max }

func (v *verifier) note(s string) { v.r.Notes = append(v.r.Notes, s) }

// ran counts a check.
func (v *verifier) ran() { v.r.Checks++ }

// anySince reports whether a finding of one of the given checks was added
// since index i.
func (v *verifier) anySince(i int, checks ...string) bool {
	for _, f := range v.r.Findings[i:] {
		for _, c := range checks {
			if f.Check == c {
				return true
			}
		}
	}
	return false
}
