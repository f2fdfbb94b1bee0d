package source

import (
	"fmt"
	"net/url"
	"path"
	"strings"
)

// hiveNull is how hive-style directories name a null partition value.
const hiveNull = "__HIVE_DEFAULT_PARTITION__"

// PartitionValue returns the value partition column holds for every row
// of f, as the lake records it: a Delta add action's partitionValues entry
// (under the column's physical name with column mapping), or for a Parquet
// folder the hive-style directory column=value on the file's path,
// unescaped. null is true for a null value; an error says the file has no
// such partition (a Delta column that is not a partition column, a path
// without the directory) or that the table kind has none to give.
func (t *Table) PartitionValue(f *File, column string) (value string, null bool, err error) {
	switch {
	case t.delta != nil:
		return t.delta.partitionValue(f, column)
	case t.iceberg != nil:
		return "", false, usagef("%s is an Iceberg table: its partition values are transforms of columns, read through its partition spec (bucket(B, series column) with --shard-function iceberg-bucket), not a partition column", t.Location)
	}
	return hivePartitionValue(f, column)
}

func (d *deltaTable) partitionValue(f *File, column string) (string, bool, error) {
	if !d.parts[column] {
		return "", false, fmt.Errorf("%s: %q is not a partition column of the table (its partition columns: %s)", f.Rel, column, listOrNone(d.snap.MetaData.PartitionColumns))
	}
	c, ok := d.snap.Column(column)
	if !ok {
		return "", false, fmt.Errorf("%s: partition column %q is not in the table schema", f.Rel, column)
	}
	add := d.snap.Files[f.deltaFile]
	v, ok := add.PartitionValues[c.Physical]
	if !ok {
		v, ok = add.PartitionValues[c.Name]
	}
	if !ok {
		return "", false, fmt.Errorf("%s: the log's add action gives no value for partition column %q", f.Rel, column)
	}
	// Delta writes a null partition value as null (or, by older writers, "").
	if v == nil || *v == "" {
		return "", true, nil
	}
	return *v, false, nil
}

// hivePartitionValue reads column=value from the directories of f's path
// below the folder; the deepest one counts when several name the column.
func hivePartitionValue(f *File, column string) (string, bool, error) {
	dirs := strings.Split(path.Dir(f.Rel), "/")
	for i := len(dirs) - 1; i >= 0; i-- {
		k, v, ok := strings.Cut(dirs[i], "=")
		if !ok {
			continue
		}
		if uk, err := url.PathUnescape(k); err == nil {
			k = uk
		}
		if k != column {
			continue
		}
		if v == hiveNull {
			return "", true, nil
		}
		uv, err := url.PathUnescape(v)
		if err != nil {
			return "", false, fmt.Errorf("%s: directory %q: %v", f.Rel, dirs[i], err)
		}
		return uv, false, nil
	}
	return "", false, fmt.Errorf("%s: no %s=VALUE directory on its path (a hive-style partition of the folder)", f.Rel, column)
}

func listOrNone(cols []string) string {
	if len(cols) == 0 {
		return "none"
	}
	return strings.Join(cols, ", ")
}
