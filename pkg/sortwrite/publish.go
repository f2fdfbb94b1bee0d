package sortwrite

import (
	"errors"
	"fmt"
	"math"

	"github.com/energyscope/servingsnap/pkg/manifest"
)

// DefaultMaxChange is the --max-change of `snapbuild build`: a new
// snapshot may have between half and twice the series and rows of the one
// CURRENT names. A nightly export that lost half its series, or doubled,
// is far likelier a broken export than news; the build refuses it rather
// than publish it over a good snapshot.
const DefaultMaxChange = 0.5

// ErrEmpty is returned by Build for an input of no rows without
// AllowEmpty: an empty nightly export must not replace a good snapshot.
var ErrEmpty = errors.New("empty input")

// ErrImplausible is returned by Build when the new snapshot's series or
// rows differ from CURRENT's by more than MaxChange allows.
var ErrImplausible = errors.New("implausible change")

// checkEmpty refuses 0 rows unless opt.AllowEmpty.
func checkEmpty(rows int64, files int, location string, opt Options) error {
	if rows > 0 || opt.AllowEmpty {
		return nil
	}
	return fmt.Errorf("%w: %s holds no rows (%d files): nothing published; pass --allow-empty to publish an empty snapshot", ErrEmpty, location, files)
}

// checkChange compares the new snapshot's series and row counts with the
// current snapshot's (prev; nil when there is none). With ratio r in
// (0, 1), each count must lie in [old·(1−r), old/(1−r)]: r = 0.5 allows
// halving and doubling, r = 0.2 a fall to 80% or a rise to 125%. The bound
// is symmetric in proportion, so a shrink and the growth that undoes it
// are judged alike. r = 0 disables the check; an empty snapshot allowed
// by AllowEmpty is not judged again here; a first snapshot has nothing
// to compare with.
func checkChange(prev *manifest.Manifest, rows, series int64, opt Options) error {
	r := opt.MaxChange
	if r == 0 || prev == nil || (rows == 0 && opt.AllowEmpty) {
		return nil
	}
	for _, c := range []struct {
		what     string
		old, new int64
	}{{"series", prev.Stats.Series, series}, {"rows", prev.Stats.Rows, rows}} {
		if c.old == 0 {
			continue // growth from nothing has no proportion
		}
		lo, hi := float64(c.old)*(1-r), float64(c.old)/(1-r)
		if n := float64(c.new); n < lo || n > hi {
			pct := 100 * (n - float64(c.old)) / float64(c.old)
			return fmt.Errorf("%w: the new snapshot has %d %s, snapshot %d (CURRENT) has %d: a change of %+.0f%%, outside what --max-change %g allows (%d to %d); check the input, or pass --max-change 0 to build it anyway",
				ErrImplausible, c.new, c.what, prev.SnapshotID, c.old, pct, r, int64(math.Ceil(lo)), int64(math.Floor(hi)))
		}
	}
	return nil
}

// checkMaxChange validates Options.MaxChange.
func checkMaxChange(r float64) error {
	if r < 0 || r >= 1 || math.IsNaN(r) {
		return fmt.Errorf("max-change %g: want a ratio in [0, 1): 0.5 allows halving and doubling, 0 disables the check", r)
	}
	return nil
}
