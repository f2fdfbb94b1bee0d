package wal

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	for _, tc := range []struct {
		name     string
		payloads [][]byte
	}{
		{"empty payload", [][]byte{{}}},
		{"one byte", [][]byte{{0}}},
		{"header-sized", [][]byte{make([]byte, recordHeaderSize)}},
		{"zeros", [][]byte{make([]byte, 4096)}},
		{"several", [][]byte{[]byte("a"), {}, []byte("bcd"), make([]byte, 17)}},
		{"1 MiB", [][]byte{big}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b []byte
			for i, p := range tc.payloads {
				kind := kindNext
				if i == 0 {
					kind = kindFirst
				}
				b = appendRecord(b, kind, p)
			}
			for i, want := range tc.payloads {
				kind, got, size, err := parseRecord(b)
				if err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
				if wantKind := map[bool]byte{true: kindFirst, false: kindNext}[i == 0]; kind != wantKind {
					t.Errorf("record %d: kind %d, want %d", i, kind, wantKind)
				}
				if !bytes.Equal(got, want) || size != recordHeaderSize+len(want) {
					t.Fatalf("record %d: got %d bytes (size %d), want %d", i, len(got), size, len(want))
				}
				b = b[size:]
			}
			if len(b) != 0 {
				t.Fatalf("%d bytes left over", len(b))
			}
		})
	}
}

// TestRecordBytes pins the layout of docs/FORMAT.md §6 to exact bytes (the
// CRCs were checked against an independent CRC-32C implementation).
func TestRecordBytes(t *testing.T) {
	got := hex.EncodeToString(appendRecord(nil, kindFirst, []byte("abc")))
	const want = "03000000" + "01" + "000000" + "5b9f298a" + "4f688328" + "616263"
	if got != want {
		t.Fatalf("record bytes\n got %s\nwant %s", got, want)
	}
	if got := hex.EncodeToString(segmentHeader(7)); got != "53534e415057414c"+"02000000"+"07000000" {
		t.Fatalf("segment header %s", got)
	}
	// the link record of segment 7: segment 6 ended at offset 4096
	if got := hex.EncodeToString(appendLink(nil, Position{Segment: 6, Offset: 4096})); got[:16] != "08000000"+"03"+"000000" || got[len(got)-16:] != "06000000"+"00100000" {
		t.Fatalf("link record %s", got)
	}
}

func TestParseRecordProblems(t *testing.T) {
	rec := appendRecord(nil, kindFirst, []byte("payload"))
	flip := func(i int) []byte {
		b := bytes.Clone(rec)
		b[i] ^= 0x40
		return b
	}
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"zeroed header", make([]byte, 64), errZeroHeader},
		{"zeroed short header", make([]byte, 5), errZeroHeader},
		{"cut in header", rec[:9], errShortHeader},
		{"cut in payload", rec[:len(rec)-1], errShortPayload},
		{"header only", rec[:recordHeaderSize], errShortPayload},
		{"kind zero", func() []byte { b := bytes.Clone(rec); b[offKind] = 0; return b }(), errBadHeader},
		{"reserved set", flip(offReserved + 1), errBadHeader},
		{"payload flipped", flip(len(rec) - 1), errBadPayload},
		{"crc flipped", flip(offCRC), errBadPayload},
	}
	for i := 0; i < offCRC; i++ {
		cases = append(cases, struct {
			name string
			b    []byte
			want error
		}{"header byte flipped", flip(i), errBadHeader})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, _, err := parseRecord(tc.b); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestLaterWrite(t *testing.T) {
	a := appendRecord(nil, kindFirst, []byte("first of write 1"))
	a2 := appendRecord(nil, kindNext, []byte("second of write 1"))
	b := appendRecord(nil, kindFirst, []byte("first of write 2"))
	bad := func(r []byte) []byte { r = bytes.Clone(r); r[len(r)-1] ^= 1; return r }
	badHeader := func(r []byte) []byte { r = bytes.Clone(r); r[offLength] ^= 1; return r }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, tc := range []struct {
		name   string
		tail   []byte
		at     int
		intact int
	}{
		{"bad last record", bad(a), -1, 0},
		{"bad then zeros", cat(bad(a), make([]byte, 100)), -1, 0},
		{"bad then same write", cat(bad(a), a2), -1, 1},
		{"bad header then same write", cat(badHeader(a), a2), -1, 1},
		{"bad then later write", cat(bad(a), b), len(a), 0},
		{"bad then same then later", cat(bad(a), a2, b), len(a) + len(a2), 1},
		{"bad header then later write", cat(badHeader(a), b), len(a), 0},
		{"zeros then later write", cat(make([]byte, 40), b), 40, 0},
		{"cut payload", a[:len(a)-3], -1, 0},
		{"garbage", bytes.Repeat([]byte{1, 0, 0, 0}, 50), -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at, intact := laterWrite(tc.tail)
			if at != tc.at || intact != tc.intact {
				t.Fatalf("laterWrite = %d, %d; want %d, %d", at, intact, tc.at, tc.intact)
			}
		})
	}
}

func TestSegmentName(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    uint32
		ok   bool
	}{
		{"00000001.wal", 1, true},
		{"00000042.wal", 42, true},
		{"4294967295.wal", math.MaxUint32, true},
		{"00000000.wal", 0, false},
		{"0000001.wal", 0, false},
		{"000000001.wal", 0, false},
		{"00000001.wal.corrupt", 0, false},
		{"0000000a.wal", 0, false},
		{"+0000001.wal", 0, false},
		{"4294967296.wal", 0, false},
		{"LOCK", 0, false},
	} {
		n, ok := parseSegmentName(tc.name)
		if n != tc.n || ok != tc.ok {
			t.Errorf("parseSegmentName(%q) = %d, %v; want %d, %v", tc.name, n, ok, tc.n, tc.ok)
		}
		if ok && segmentName(n) != tc.name {
			t.Errorf("segmentName(%d) = %q", n, segmentName(n))
		}
	}
}

func TestPosition(t *testing.T) {
	ps := []Position{{}, {0, 1}, {1, 0}, {1, 16}, {1, math.MaxUint32}, {2, 0}, {math.MaxUint32, math.MaxUint32}}
	for i, p := range ps {
		if q := PositionFromUint64(p.Uint64()); q != p {
			t.Errorf("%v round-trips to %v", p, q)
		}
		for j, q := range ps {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := p.Compare(q); got != want {
				t.Errorf("%v.Compare(%v) = %d, want %d", p, q, got, want)
			}
		}
	}
	if !(Position{}).IsZero() || (Position{1, 16}).IsZero() || (Position{}).Uint64() != 0 {
		t.Error("zero position")
	}
	if got := (Position{3, 1048592}).String(); got != "00000003:1048592" {
		t.Errorf("String = %q", got)
	}
	if got := (Position{3, 100}).Uint64(); got != 3<<32|100 {
		t.Errorf("Uint64 = %d", got)
	}
}
