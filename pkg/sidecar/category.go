package sidecar

import "strings"

// MatchCategory reports whether an attribute value v is in category c: v
// equals c, or v continues c at a '/' boundary ("Petroleum" matches
// "Petroleum/Prices/Spot", not "PetroleumCoke"). A trailing '/' on c is
// ignored. The category is a per-series attribute, so it lives in the
// index; the server's category tickets and snapinspect latest --category
// both select series with this one rule.
func MatchCategory(v, c string) bool {
	c = strings.TrimSuffix(c, "/")
	return v == c || (strings.HasPrefix(v, c) && len(v) > len(c) && v[len(c)] == '/')
}
