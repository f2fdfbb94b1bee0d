package wal

// Golden scripts of the log's life (testdata/*.txt, run by
// internal/datadriven; go test -run TestScripts -rewrite records new
// output). Commands:
//
//	open [segment-size=N] [quarantine]  Open the log (prints what it cut)
//	append [as=NAME]                    one Append of the input, a record a line; NAME keeps the position
//	replay [after=POS]                  Replay after POS (a NAME, segment:offset, or the start)
//	truncate-before at=POS              TruncateBefore
//	close                               Close
//	tear cut=N                          cut the newest segment's last N bytes (the log closed): a torn write
//	flip at=N                           flip the bits of the newest segment's byte N (the log closed): damage
//	segments                            the segment files and their sizes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/datadriven"
)

func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/*.txt", func(t *testing.T, path string) {
		s := &walScript{t: t, dir: t.TempDir(), names: map[string]Position{}}
		defer func() {
			if s.w != nil {
				s.w.Close()
			}
		}()
		datadriven.RunFile(t, path, s.run)
	})
}

type walScript struct {
	t     *testing.T
	dir   string
	w     *WAL
	names map[string]Position
}

func (s *walScript) run(d *datadriven.Directive) string {
	switch d.Cmd {
	case "open":
		return s.open(d)
	case "append":
		return s.append(d)
	case "replay":
		return s.replay(d)
	case "truncate-before":
		n, err := s.log(d).TruncateBefore(s.position(d, "at"))
		if err != nil {
			return s.errText(err)
		}
		return fmt.Sprintf("deleted %d segments, first %v", n, s.w.First())
	case "close":
		if err := s.log(d).Close(); err != nil {
			return s.errText(err)
		}
		s.w = nil
		return "closed"
	case "tear", "flip":
		return s.damage(d)
	case "segments":
		return s.segments()
	}
	d.Fatalf(s.t, "unknown command")
	return ""
}

// errText prints err with the log's temporary directory as DIR.
func (s *walScript) errText(err error) string {
	return "error: " + strings.ReplaceAll(err.Error(), s.dir, "DIR")
}

// log is the open log, which the command needs.
func (s *walScript) log(d *datadriven.Directive) *WAL {
	if s.w == nil {
		d.Fatalf(s.t, "the log is not open")
	}
	return s.w
}

// position reads argument key: a name kept by append as=, segment:offset,
// or the zero Position when it is absent.
func (s *walScript) position(d *datadriven.Directive, key string) Position {
	v, ok := d.ArgOne(key)
	if !ok {
		return Position{}
	}
	if p, ok := s.names[v]; ok {
		return p
	}
	seg, off, ok := strings.Cut(v, ":")
	sn, err1 := strconv.ParseUint(seg, 10, 32)
	on, err2 := strconv.ParseUint(off, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		d.Fatalf(s.t, "%s=%s is neither a name nor segment:offset", key, v)
	}
	return Position{Segment: uint32(sn), Offset: uint32(on)}
}

func (s *walScript) open(d *datadriven.Directive) string {
	if s.w != nil {
		d.Fatalf(s.t, "the log is already open")
	}
	var opts Options
	if v, ok := d.ArgOne("segment-size"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			d.Fatalf(s.t, "segment-size: %v", err)
		}
		opts.SegmentSize = n
	}
	_, opts.Quarantine = d.Arg("quarantine")
	w, err := Open(s.dir, opts)
	if err != nil {
		return s.errText(err)
	}
	s.w = w
	out := fmt.Sprintf("first %v, end %v", w.First(), w.End())
	if tr := w.Truncated(); tr != nil {
		out += "\ntruncated: " + strings.ReplaceAll(tr.String(), s.dir, "DIR")
	}
	return out
}

func (s *walScript) append(d *datadriven.Directive) string {
	var ps [][]byte
	for _, l := range strings.Split(d.Input, "\n") {
		ps = append(ps, []byte(l))
	}
	pos, err := s.log(d).Append(context.Background(), ps...)
	if err != nil {
		return s.errText(err)
	}
	if name, ok := d.ArgOne("as"); ok {
		s.names[name] = pos
	}
	return fmt.Sprintf("end %v", pos)
}

func (s *walScript) replay(d *datadriven.Directive) string {
	var out []string
	err := s.log(d).Replay(s.position(d, "after"), func(pos Position, p []byte) error {
		out = append(out, fmt.Sprintf("%v %s", pos, p))
		return nil
	})
	if err != nil {
		out = append(out, s.errText(err))
	}
	if len(out) == 0 {
		return "no records"
	}
	return strings.Join(out, "\n")
}

// damage cuts the newest segment's tail (tear cut=N) or flips the bits of
// one of its bytes (flip at=N), with the log closed.
func (s *walScript) damage(d *datadriven.Directive) string {
	if s.w != nil {
		d.Fatalf(s.t, "close the log before damaging it")
	}
	key := map[string]string{"tear": "cut", "flip": "at"}[d.Cmd]
	v, _ := d.ArgOne(key)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		d.Fatalf(s.t, "%s=%q: want a number of bytes", key, v)
	}
	var last string
	for _, name := range s.segmentNames() {
		if strings.HasSuffix(name, segmentSuffix) {
			last = filepath.Join(s.dir, name)
		}
	}
	if last == "" {
		d.Fatalf(s.t, "no segment to damage")
	}
	b, err := os.ReadFile(last)
	if err != nil {
		s.t.Fatal(err)
	}
	if n >= int64(len(b)) {
		d.Fatalf(s.t, "%s=%d: %s has %d bytes", key, n, filepath.Base(last), len(b))
	}
	if d.Cmd == "tear" {
		b = b[:int64(len(b))-n]
	} else {
		b[n] ^= 0xff
	}
	if err := os.WriteFile(last, b, 0o644); err != nil {
		s.t.Fatal(err)
	}
	return fmt.Sprintf("%s: %s %d, now %d bytes", filepath.Base(last), key, n, len(b))
}

// segmentNames lists the segment files (and quarantined ones), in order.
func (s *walScript) segmentNames() []string {
	es, err := os.ReadDir(s.dir)
	if err != nil {
		s.t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		if strings.Contains(e.Name(), segmentSuffix) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

func (s *walScript) segments() string {
	var out []string
	for _, n := range s.segmentNames() {
		fi, err := os.Stat(filepath.Join(s.dir, n))
		if err != nil {
			s.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %d bytes", n, fi.Size()))
	}
	if len(out) == 0 {
		return "no segments"
	}
	return strings.Join(out, "\n")
}
