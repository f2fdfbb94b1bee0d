package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testiceberg"
)

// TestBuildFromRESTCatalog builds from an Iceberg REST catalog (the
// test catalog of internal/testiceberg, which enforces the bearer token
// and the OAuth2 client-credentials exchange) by --catalog-uri and
// --table, with a token, with a credential, and fails clearly on a wrong
// token, an unknown table and a table name without a namespace.
func TestBuildFromRESTCatalog(t *testing.T) {
	wh := t.TempDir()
	tables, err := testiceberg.Write(context.Background(), wh)
	if err != nil {
		t.Fatal(err)
	}
	cat := &testiceberg.RESTCatalog{Warehouse: wh, Name: "lake", Token: "s3cr3t-token", ClientID: "snap", Secret: "pw"}
	srv := httptest.NewServer(cat)
	defer srv.Close()

	for _, c := range []struct {
		name     string
		args     []string
		code     int
		rows     int    // with code 0
		snapshot string // with code 0: the lake snapshot id built
		stderr   string // with code != 0: part of the message
	}{
		{"token", []string{"--table", "db.mor_v2", "--warehouse", "lake", "--catalog-token", "s3cr3t-token"}, 0, len(tables[0].Want), "", ""},
		{"credential", []string{"--table", "db.mor_v3", "--warehouse", "lake", "--catalog-credential", "snap:pw"}, 0, len(tables[1].Want), "", ""},
		{"old snapshot", []string{"--table", "db.mor_v2", "--warehouse", "lake", "--catalog-token", "s3cr3t-token", "--snapshot-id", jsonInt(tables[0].BeforeSnapshotID)}, 0, len(tables[0].Before), jsonInt(tables[0].BeforeSnapshotID), ""},
		{"wrong token", []string{"--table", "db.mor_v2", "--warehouse", "lake", "--catalog-token", "nope"}, 1, 0, "", "iceberg REST catalog " + srv.URL + ": NotAuthorizedException"},
		{"wrong credential", []string{"--table", "db.mor_v2", "--warehouse", "lake", "--catalog-credential", "snap:nope"}, 1, 0, "", "invalid_client: unknown client credentials"},
		{"unknown table", []string{"--table", "db.nope", "--warehouse", "lake", "--catalog-token", "s3cr3t-token"}, 1, 0, "", "table db.nope: NoSuchTableException"},
		{"no namespace", []string{"--table", "mor_v2", "--warehouse", "lake", "--catalog-token", "s3cr3t-token"}, 1, 0, "", `"mor_v2": want namespace.name`},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "PET")
			args := append([]string{"build", "--catalog-uri", srv.URL, "--out", out, "--json"}, c.args...)
			code, stdout, stderr := snapbuild(args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.code, stdout, stderr)
			}
			if code != 0 {
				if !strings.Contains(stderr, c.stderr) {
					t.Fatalf("stderr %q does not say %q", stderr, c.stderr)
				}
				return
			}
			var rep struct {
				Rows    int `json:"rows"`
				Lineage struct {
					Kind             string `json:"kind"`
					SnapshotID       string `json:"lake_snapshot_id"`
					MetadataLocation string `json:"metadata_location"`
				} `json:"lineage"`
			}
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("report: %v\n%s", err, stdout)
			}
			if rep.Rows != c.rows || rep.Lineage.Kind != "iceberg" || !strings.HasSuffix(rep.Lineage.MetadataLocation, ".metadata.json") {
				t.Fatalf("report %+v, want %d rows of an iceberg table", rep, c.rows)
			}
			if c.snapshot != "" && rep.Lineage.SnapshotID != c.snapshot {
				t.Fatalf("built lake snapshot %s, want %s", rep.Lineage.SnapshotID, c.snapshot)
			}
		})
	}
	// The table was loaded through the catalog, not around it.
	if reqs := cat.Requests(); !slices.Contains(reqs, "GET /v1/namespaces/db/tables/mor_v2") || !slices.Contains(reqs, "POST /v1/oauth/tokens") {
		t.Fatalf("catalog requests %v: want a table load and a token exchange", reqs)
	}
}

func jsonInt(v int64) string { b, _ := json.Marshal(v); return string(b) }
