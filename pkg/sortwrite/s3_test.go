package sortwrite

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/lake/objstore"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// fakeS3 serves an in-memory S3 on loopback and points the AWS chain at
// static test credentials (and away from the instance metadata service).
func fakeS3(t *testing.T) (*s3mem.Backend, string) {
	t.Helper()
	be := s3mem.New()
	ts := httptest.NewServer(gofakes3.New(be).Server())
	t.Cleanup(ts.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	if err := be.CreateBucket("lake"); err != nil {
		t.Fatal(err)
	}
	return be, ts.URL
}

// upload copies a local directory to s3://lake/<prefix>/.
func upload(t *testing.T, be *s3mem.Backend, dir, prefix string) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, err = be.PutObject("lake", prefix+"/"+filepath.ToSlash(rel), map[string]string{}, bytes.NewReader(b), int64(len(b)), nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A build from S3 equals the build from the same files on local disk: the
// same rows, the same inputs (paths, sizes, rows, checksums) and the same
// lake snapshot, for a plain Parquet folder and for a Delta table with
// deletion vectors, column mapping and V2 checkpoints.
func TestBuildFromS3EqualsLocal(t *testing.T) {
	be, endpoint := fakeS3(t)
	cases := []struct{ name, dir string }{
		{"parquet", filepath.Join("..", "..", "testdata", "v1", "lake")},
		{"delta", filepath.Join("..", "..", "testdata", "delta", "spark_dv")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			upload(t, be, c.dir, "tables/"+c.name)
			local := filepath.Join(t.TempDir(), "L")
			remote := filepath.Join(t.TempDir(), "R")
			if _, err := build(t, c.dir, local, nil); err != nil {
				t.Fatal(err)
			}
			sum, err := build(t, "s3://lake/tables/"+c.name, remote, func(o *Options) {
				o.Lake.S3 = objstore.S3Config{Endpoint: endpoint}
			})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := tableRows(t, remote), tableRows(t, local); !reflect.DeepEqual(got, want) || len(got) == 0 {
				t.Fatalf("rows from S3 (%d) differ from local (%d)", len(got), len(want))
			}
			lm, rm := current(t, local), current(t, remote)
			if !reflect.DeepEqual(lm.Lineage.Inputs, rm.Lineage.Inputs) || lm.Lineage.LakeSnapshotID != rm.Lineage.LakeSnapshotID {
				t.Fatalf("lineage differs:\nlocal  %+v\nremote %+v", lm.Lineage, rm.Lineage)
			}
			if want := "s3://lake/tables/" + c.name; sum.Lineage.Source != want || (c.name == "delta" && sum.Lineage.Location != want) {
				t.Fatalf("lineage source %q location %q", sum.Lineage.Source, sum.Lineage.Location)
			}
		})
	}
	t.Run("missing data file", func(t *testing.T) {
		upload(t, be, filepath.Join("..", "..", "testdata", "delta", "spark_dv"), "tables/broken")
		objs, err := be.ListBucket("lake", &gofakes3.Prefix{HasPrefix: true, Prefix: "tables/broken/col-"}, gofakes3.ListBucketPage{})
		if err != nil || len(objs.Contents) == 0 {
			t.Fatalf("list: %v", err)
		}
		var gone string
		for _, o := range objs.Contents {
			if strings.HasSuffix(o.Key, ".parquet") {
				gone = o.Key
			}
		}
		if _, err := be.DeleteObject("lake", gone); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "B")
		_, err = build(t, "s3://lake/tables/broken", out, func(o *Options) { o.Lake.S3 = objstore.S3Config{Endpoint: endpoint} })
		if err == nil || !strings.Contains(err.Error(), filepath.Base(gone)) {
			t.Fatalf("err %v, want one naming %s", err, filepath.Base(gone))
		}
		if _, err := os.Stat(filepath.Join(out, "CURRENT")); !os.IsNotExist(err) {
			t.Fatalf("published: %v", err)
		}
	})
}

func current(t *testing.T, dir string) *manifest.Manifest {
	t.Helper()
	ds, err := dataset.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ds.Current()
	if err != nil {
		t.Fatal(err)
	}
	return m
}
