package vortexio

import (
	"fmt"
	"io"
	"strings"
)

// Describe prints the schema, row count and layout tree of f, with the array
// encoding tree and byte size of every flat segment. It backs
// `snapinspect vortex FILE`; reading the encoding of each chunk means reading
// every data segment's trailing flatbuffer, so it touches the whole file.
func Describe(w io.Writer, f *File) error {
	fmt.Fprintf(w, "rows: %d\n", f.NumRows())
	fmt.Fprintf(w, "dtype: %s\n", f.dtype)
	fmt.Fprintf(w, "schema:\n")
	for _, fl := range f.schema.Fields() {
		fmt.Fprintf(w, "  %s: %s (nullable=%v)\n", fl.Name, fl.Type, fl.Nullable)
	}
	fmt.Fprintf(w, "layout:\n")
	return f.describeLayout(w, f.root, "  ", "", map[uint32]string{})
}

// describeLayout prints l; trees caches the encoding tree per segment, since
// a (hostile) layout tree may reference one segment many times.
func (f *File) describeLayout(w io.Writer, l *Layout, indent, label string, trees map[uint32]string) error {
	if label != "" {
		label += ": "
	}
	switch l.ID {
	case "vortex.flat":
		seg := f.segs[l.Segments[0]]
		tree, ok := trees[l.Segments[0]]
		if !ok {
			if b, err := f.segment(l.Segments[0]); err != nil {
				return err
			} else if nd, err := f.parseFlat(b); err != nil {
				tree = "error: " + err.Error()
			} else {
				tree = nd.String()
			}
			trees[l.Segments[0]] = tree
		}
		_, err := fmt.Fprintf(w, "%s%s%s rows=%d bytes=%d %s\n", indent, label, l.ID, l.RowCount, seg.length, tree)
		return err
	}
	fmt.Fprintf(w, "%s%s%s rows=%d dtype=%s\n", indent, label, l.ID, l.RowCount, l.DType)
	for i, c := range l.Children {
		lab := ""
		switch l.ID {
		case "vortex.struct":
			names := l.DType.Names
			k := i
			if l.DType.Nullable {
				k--
			}
			if k < 0 {
				lab = "validity"
			} else {
				lab = names[k]
			}
		case "vortex.zoned", "vortex.stats":
			lab = []string{"data", "zones"}[i]
			if i == 1 {
				fmt.Fprintf(w, "%s  zones: (zone maps, not read) %s rows=%d\n", indent, c.ID, c.RowCount)
				continue
			}
		case "vortex.dict":
			lab = []string{"values", "codes"}[i]
		case "vortex.chunked":
			lab = fmt.Sprintf("[%d]", i)
		}
		if err := f.describeLayout(w, c, indent+"  ", lab, trees); err != nil {
			return err
		}
	}
	return nil
}

func (n *anode) String() string {
	if len(n.kids) == 0 {
		return n.enc
	}
	parts := make([]string, len(n.kids))
	for i, k := range n.kids {
		parts[i] = k.String()
	}
	return n.enc + "(" + strings.Join(parts, ", ") + ")"
}

// Encodings lists the array encoding ids used by the file's data segments
// (zone maps excluded), each with the number of flat segments using it.
func (f *File) Encodings() (map[string]int, error) {
	out := map[string]int{}
	done := map[uint32]bool{}
	var walk func(l *Layout) error
	walk = func(l *Layout) error {
		if l.ID == "vortex.flat" {
			if done[l.Segments[0]] {
				return nil
			}
			done[l.Segments[0]] = true
			b, err := f.segment(l.Segments[0])
			if err != nil {
				return err
			}
			nd, err := f.parseFlat(b)
			if err != nil {
				return err
			}
			seen := map[string]bool{}
			var visit func(n *anode)
			visit = func(n *anode) {
				seen[n.enc] = true
				for _, k := range n.kids {
					visit(k)
				}
			}
			visit(nd)
			for e := range seen {
				out[e]++
			}
			return nil
		}
		for i, c := range l.Children {
			if (l.ID == "vortex.zoned" || l.ID == "vortex.stats") && i == 1 {
				continue
			}
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk(f.root)
}
