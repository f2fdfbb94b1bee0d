package vortexio

import (
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// decodeZstd decodes vortex.zstd (used by vortex-data's compact writer for
// strings): zstd frames holding only the valid values, primitives as LE bytes
// and strings as u32 LE length + bytes.
func (d *decoder) decodeZstd(nd *anode, dt *DType, n int) (*vec, error) {
	sd := storage(dt)
	m, err := pbDecode(nd.meta)
	if err != nil {
		return nil, err
	}
	dictSize := m.uint(1)
	bufs := nd.bufs
	var opts []zstd.DOption
	if dictSize > 0 {
		if len(bufs) == 0 {
			return nil, corruptf("vortex.zstd dictionary missing")
		}
		dict := bufs[0]
		bufs = bufs[1:]
		if len(dict) >= 4 && binary.LittleEndian.Uint32(dict) == 0xEC30A437 {
			opts = append(opts, zstd.WithDecoderDicts(dict))
		} else {
			opts = append(opts, zstd.WithDecoderDictRaw(0, dict))
		}
	}
	var frames []pbMsg
	for _, f := range m {
		if f.num == 2 && f.wire == wireLen {
			fm, err := pbDecode(f.b)
			if err != nil {
				return nil, err
			}
			frames = append(frames, fm)
		}
	}
	if len(frames) != len(bufs) {
		return nil, corruptf("vortex.zstd has %d frames and %d buffers", len(frames), len(bufs))
	}
	if err := d.expectKids(nd, 0, 1); err != nil {
		return nil, err
	}
	v := &vec{dt: dt, n: n}
	if v.valid, _, err = d.validity(nd, dt, n, 0); err != nil {
		return nil, err
	}
	nvalid := n - v.nullCount()
	var total uint64
	for _, f := range frames {
		total += f.uint(1)
	}
	limit := uint64(d.maxRows) * 64
	if total > limit || total > 1<<31 {
		return nil, corruptf("vortex.zstd uncompressed size %d implausible", total)
	}
	opts = append(opts, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(total+1<<20))
	dec, err := zstd.NewReader(nil, opts...)
	if err != nil {
		return nil, fmt.Errorf("vortex.zstd: %w", err)
	}
	defer dec.Close()
	raw := make([]byte, 0, total)
	for i, b := range bufs {
		want := frames[i].uint(1)
		out, err := dec.DecodeAll(b, raw[len(raw):])
		if err != nil {
			return nil, corruptf("vortex.zstd frame %d: %w", i, err)
		}
		if uint64(len(out)) != want {
			return nil, corruptf("vortex.zstd frame %d has %d bytes, want %d", i, len(out), want)
		}
		raw = raw[:len(raw)+len(out)]
	}
	switch sd.Kind {
	case KindPrimitive:
		w := sd.PType.Width()
		if len(raw) != nvalid*w {
			return nil, corruptf("vortex.zstd %d bytes for %d values", len(raw), nvalid)
		}
		v.data = alignedBytes(n * w)
		k := 0
		for i := 0; i < n; i++ {
			if v.isValid(i) {
				copy(v.data[i*w:], raw[k*w:(k+1)*w])
				k++
			}
		}
	case KindUtf8, KindBinary:
		v.offs = make([]int32, n+1)
		out := make([]byte, 0, len(raw))
		p := 0
		for i := 0; i < n; i++ {
			if v.isValid(i) {
				if p+4 > len(raw) {
					return nil, corruptf("vortex.zstd strings truncated")
				}
				l := int(binary.LittleEndian.Uint32(raw[p:]))
				p += 4
				if l > len(raw)-p {
					return nil, corruptf("vortex.zstd string overruns frame")
				}
				out = append(out, raw[p:p+l]...)
				p += l
			}
			v.offs[i+1] = int32(len(out))
		}
		v.data = out
	default:
		return nil, unsupportedf("vortex.zstd for %s", dt)
	}
	return v, nil
}
