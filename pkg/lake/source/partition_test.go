package source

import (
	"strings"
	"testing"
)

func TestHivePartitionValue(t *testing.T) {
	for _, tc := range []struct {
		rel, col string
		want     string
		null     bool
		err      string
	}{
		{rel: "b=3/part-0.parquet", col: "b", want: "3"},
		{rel: "year=2020/b=12/x.parquet", col: "b", want: "12"},
		{rel: "year=2020/b=12/x.parquet", col: "year", want: "2020"},
		{rel: "b=1/sub/b=7/x.parquet", col: "b", want: "7"},
		{rel: "b=%2D1/x.parquet", col: "b", want: "-1"},
		{rel: "my%20col=4/x.parquet", col: "my col", want: "4"},
		{rel: "b=__HIVE_DEFAULT_PARTITION__/x.parquet", col: "b", null: true},
		{rel: "b=/x.parquet", col: "b", want: ""},
		{rel: "x.parquet", col: "b", err: "x.parquet: no b=VALUE directory"},
		{rel: "bb=3/x.parquet", col: "b", err: "no b=VALUE directory"},
		{rel: "b=3/x.parquet", col: "B", err: "no B=VALUE directory"},
		{rel: "b=%zz/x.parquet", col: "b", err: `directory "b=%zz"`},
	} {
		got, null, err := hivePartitionValue(&File{Rel: tc.rel}, tc.col)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s %s: error %v, want one containing %q", tc.rel, tc.col, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want || null != tc.null {
			t.Errorf("%s %s = %q, null %v, %v; want %q, null %v", tc.rel, tc.col, got, null, err, tc.want, tc.null)
		}
	}
}
