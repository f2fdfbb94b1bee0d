package cliutil

import "testing"

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"4096", 4096, true}, {"512MiB", 512 << 20, true}, {"2GiB", 2 << 30, true},
		{"1.5GB", 1_500_000_000, true}, {" 6 GiB ", 6 << 30, true}, {"10B", 10, true}, {"1KB", 1000, true},
		{"", 0, false}, {"MiB", 0, false}, {"-1", 0, false}, {"512mb", 0, false}, {"1e400", 0, false}, {"9999999999TiB", 0, false},
	} {
		got, err := ParseSize(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseSize(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
