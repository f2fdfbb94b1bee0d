package verify

import (
	"path/filepath"
	"testing"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// BenchmarkVerifyTiers is fast and deep verification of the same lake
// built all hot, hot since 2022 (most rows cold) and all cold: what the
// cold tier's decode costs deep verification.
func BenchmarkVerifyTiers(b *testing.B) {
	f := getFixture(b)
	tf := getTierFixture(b)
	hot := filepath.Join(b.TempDir(), "SYN") // as the tiered ones: no portable copy
	testsnap.Build(b, f.lake, hot, func(o *sortwrite.Options) { o.BatchRows = 5000 })
	dirs := map[string]string{"allhot": hot, "since": tf.dirs["since"], "allcold": tf.dirs["allcold"]}
	for _, name := range []string{"allhot", "since", "allcold"} {
		for _, lv := range []struct {
			name string
			opt  Options
		}{{"fast", Options{}}, {"deep", Options{Deep: true}}} {
			b.Run(name+"/"+lv.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					rep, err := Verify(dirs[name], lv.opt)
					if err != nil || !rep.OK {
						b.Fatal(err, findings(rep))
					}
				}
			})
		}
	}
}
