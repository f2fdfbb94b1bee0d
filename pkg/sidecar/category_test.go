package sidecar

import "testing"

func TestMatchCategory(t *testing.T) {
	for _, c := range []struct {
		v, c string
		want bool
	}{
		{"Petroleum", "Petroleum", true},
		{"Petroleum/Prices/Spot", "Petroleum", true},
		{"Petroleum/Prices/Spot", "Petroleum/Prices", true},
		{"Petroleum/Prices/Spot", "Petroleum/Prices/", true},
		{"Petroleum/Prices/Spot", "Petroleum/Prices/Spot", true},
		{"PetroleumCoke/Prices", "Petroleum", false},
		{"Petroleum/Prices/Spot", "Petroleum/Pri", false},
		{"Petroleum", "Petroleum/Prices", false},
		{"Natural Gas/Prices", "Prices", false},
	} {
		if got := MatchCategory(c.v, c.c); got != c.want {
			t.Errorf("MatchCategory(%q, %q) = %v", c.v, c.c, got)
		}
	}
}
