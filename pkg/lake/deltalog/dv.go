package deltalog

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"net/url"

	"github.com/energyscope/servingsnap/pkg/lake/objstore"
	"github.com/energyscope/servingsnap/pkg/lake/roaring"
)

const z85Alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"

var z85Value = func() (t [256]int16) {
	for i := range t {
		t[i] = -1
	}
	for i := 0; i < len(z85Alphabet); i++ {
		t[z85Alphabet[i]] = int16(i)
	}
	return t
}()

// DecodeZ85 decodes Z85 (ZeroMQ RFC 32), the Base85 variant Delta writes
// inline deletion vectors and DV file UUIDs in: every 5 characters are 4
// bytes, big-endian.
func DecodeZ85(s string) ([]byte, error) {
	if len(s)%5 != 0 {
		return nil, fmt.Errorf("z85: length %d is not a multiple of 5", len(s))
	}
	out := make([]byte, 0, len(s)/5*4)
	for i := 0; i < len(s); i += 5 {
		var v uint64
		for j := 0; j < 5; j++ {
			d := z85Value[s[i+j]]
			if d < 0 {
				return nil, fmt.Errorf("z85: invalid character %q at %d", s[i+j], i+j)
			}
			v = v*85 + uint64(d)
		}
		if v > 0xFFFFFFFF {
			return nil, fmt.Errorf("z85: group at %d overflows 32 bits", i)
		}
		out = binary.BigEndian.AppendUint32(out, uint32(v))
	}
	return out, nil
}

// Path returns where an on-disk deletion vector lives: relative to the
// table root for storage type u (<prefix>/deletion_vector_<uuid>.bin), or
// the absolute path for p. Inline vectors have no path.
func (dv *DeletionVector) Path() (string, error) {
	switch dv.StorageType {
	case "u":
		s := dv.PathOrInlineDv
		prefix, enc := s[:len(s)-20], s[len(s)-20:]
		raw, err := DecodeZ85(enc)
		if err != nil {
			return "", fmt.Errorf("deletion vector uuid %q: %w", enc, err)
		}
		h := hex.EncodeToString(raw)
		name := "deletion_vector_" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32] + ".bin"
		if prefix != "" {
			name = prefix + "/" + name
		}
		return name, nil
	case "p":
		p, err := url.PathUnescape(dv.PathOrInlineDv)
		if err != nil {
			return "", fmt.Errorf("deletion vector path %q: %w", dv.PathOrInlineDv, err)
		}
		return p, nil
	}
	return "", fmt.Errorf("deletion vector of storage type %q has no file", dv.StorageType)
}

// maxDVBytes bounds one serialized deletion vector.
const maxDVBytes = 1 << 30

// Load returns the row positions the deletion vector deletes, ascending.
// rows is the data file's row count: a position at or past it is an
// error, and so is a cardinality other than the descriptor's. An on-disk
// vector is read at its offset and its CRC-32 checked (PROTOCOL.md,
// "Deletion Vector File Storage Format").
func (dv *DeletionVector) Load(ctx context.Context, st objstore.Store, rows int64) ([]uint64, error) {
	if rows <= 0 {
		rows = 0
	}
	vals, err := dv.decode(ctx, st, uint64(rows))
	if err != nil {
		return nil, err
	}
	if int64(len(vals)) != dv.Cardinality {
		return nil, fmt.Errorf("deletion vector holds %d rows, descriptor says %d", len(vals), dv.Cardinality)
	}
	if len(vals) > 0 && vals[len(vals)-1] >= uint64(rows) {
		return nil, fmt.Errorf("deletion vector deletes row %d of a file of %d rows", vals[len(vals)-1], rows)
	}
	return vals, nil
}

func (dv *DeletionVector) decode(ctx context.Context, st objstore.Store, limit uint64) ([]uint64, error) {
	if dv.SizeInBytes > maxDVBytes {
		return nil, fmt.Errorf("deletion vector of %d bytes, over the limit", dv.SizeInBytes)
	}
	var data []byte
	switch dv.StorageType {
	case "i":
		raw, err := DecodeZ85(dv.PathOrInlineDv)
		if err != nil {
			return nil, fmt.Errorf("inline deletion vector: %w", err)
		}
		if int(dv.SizeInBytes) > len(raw) || len(raw)-int(dv.SizeInBytes) >= 4 {
			return nil, fmt.Errorf("inline deletion vector decodes to %d bytes, descriptor says %d", len(raw), dv.SizeInBytes)
		}
		data = raw[:dv.SizeInBytes]
	default:
		p, err := dv.Path()
		if err != nil {
			return nil, err
		}
		data, err = readDVFile(ctx, st, p, dv)
		if err != nil {
			return nil, fmt.Errorf("deletion vector file %s: %w", st.Location(p), err)
		}
	}
	vals, err := roaring.DecodeDelta(data, limit)
	if err != nil {
		return nil, fmt.Errorf("deletion vector: %w", err)
	}
	return vals, nil
}

func readDVFile(ctx context.Context, st objstore.Store, p string, dv *DeletionVector) ([]byte, error) {
	f, size, err := st.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var off int64 = 1
	if dv.Offset != nil {
		off = int64(*dv.Offset)
	}
	ver := make([]byte, 1)
	if _, err := f.ReadAt(ver, 0); err != nil {
		return nil, fmt.Errorf("read version: %w", err)
	}
	if ver[0] != 1 {
		return nil, fmt.Errorf("format version %d, want 1", ver[0])
	}
	n := int64(dv.SizeInBytes)
	if off < 1 || off+4+n+4 > size {
		return nil, fmt.Errorf("vector at offset %d of %d bytes does not fit in the file's %d bytes", off, n, size)
	}
	buf := make([]byte, 4+n+4)
	if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
		return nil, err
	}
	if got := int64(binary.BigEndian.Uint32(buf)); got != n {
		return nil, fmt.Errorf("vector at offset %d is %d bytes, descriptor says %d", off, got, n)
	}
	data := buf[4 : 4+n]
	if want, got := binary.BigEndian.Uint32(buf[4+n:]), crc32.ChecksumIEEE(data); want != got {
		return nil, fmt.Errorf("vector at offset %d: CRC-32 %08x, file says %08x", off, got, want)
	}
	return data, nil
}
