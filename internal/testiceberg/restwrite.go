package testiceberg

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/hadoop"
	"github.com/apache/iceberg-go/table"
)

// The write side of the test REST catalog, for publishers
// (pkg/icebergtable): HEAD a table, create one (POST
// /v1/namespaces/{ns}/tables) and commit requirements and updates to one
// (POST /v1/namespaces/{ns}/tables/{name}). The work is iceberg-go's
// filesystem catalog over the same warehouse, so what a commit writes is
// what loadTable then serves, and a requirement that fails is the
// specification's 409 CommitFailedException.

// identOf parses /v1/namespaces/{ns}/tables[/{name}].
func identOf(path string) (ns []string, name string, ok bool) {
	rest := strings.TrimPrefix(path, "/v1/namespaces/")
	nsPart, tail, found := strings.Cut(rest, "/tables")
	if !found || nsPart == "" {
		return nil, "", false
	}
	name = strings.TrimPrefix(tail, "/")
	if strings.Contains(name, "/") {
		return nil, "", false
	}
	return strings.Split(nsPart, "\x1f"), name, true
}

func (c *RESTCatalog) writer() (*hadoop.Catalog, error) {
	return hadoop.NewCatalog("test-rest", c.Warehouse, iceberggo.Properties{})
}

// serveWrite answers the write requests; false when r is not one.
func (c *RESTCatalog) serveWrite(w http.ResponseWriter, r *http.Request) bool {
	ns, name, ok := identOf(r.URL.Path)
	if !ok || (r.Method != http.MethodHead && r.Method != http.MethodPost) {
		return false
	}
	cat, err := c.writer()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "ServiceFailureException", err.Error())
		return true
	}
	defer cat.Close()
	ctx := r.Context()
	switch {
	case r.Method == http.MethodHead && name != "":
		if ok, err := cat.CheckTableExists(ctx, table.Identifier(append(ns, name))); err != nil || !ok {
			w.WriteHeader(http.StatusNotFound)
			return true
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && name == "":
		var req struct {
			Name       string                   `json:"name"`
			Schema     *iceberggo.Schema        `json:"schema"`
			Spec       *iceberggo.PartitionSpec `json:"partition-spec"`
			WriteOrder *table.SortOrder         `json:"write-order"`
			Props      iceberggo.Properties     `json:"properties"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Schema == nil {
			writeError(w, http.StatusBadRequest, "BadRequestException", fmt.Sprintf("create table: %v (a schema is required)", err))
			return true
		}
		if err := os.MkdirAll(filepath.Join(append([]string{c.Warehouse}, ns...)...), 0o755); err != nil {
			writeError(w, http.StatusInternalServerError, "ServiceFailureException", err.Error())
			return true
		}
		opts := []catalog.CreateTableOpt{catalog.WithProperties(req.Props)}
		if req.Spec != nil {
			opts = append(opts, catalog.WithPartitionSpec(req.Spec))
		}
		if req.WriteOrder != nil {
			opts = append(opts, catalog.WithSortOrder(*req.WriteOrder))
		}
		tbl, err := cat.CreateTable(ctx, table.Identifier(append(ns, req.Name)), req.Schema, opts...)
		if err != nil {
			writeError(w, http.StatusConflict, "AlreadyExistsException", err.Error())
			return true
		}
		md, _ := json.Marshal(tbl.Metadata())
		writeJSON(w, map[string]any{"metadata-location": tbl.MetadataLocation(), "metadata": json.RawMessage(md), "config": map[string]string{}})
	case r.Method == http.MethodPost:
		var req struct {
			Requirements table.Requirements `json:"requirements"`
			Updates      table.Updates      `json:"updates"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, "BadRequestException", "commit: "+err.Error())
			return true
		}
		meta, loc, err := cat.CommitTable(ctx, table.Identifier(append(ns, name)), req.Requirements, req.Updates)
		switch {
		case errors.Is(err, catalog.ErrNoSuchTable):
			writeError(w, http.StatusNotFound, "NoSuchTableException", err.Error())
		case err != nil:
			writeError(w, http.StatusConflict, "CommitFailedException", err.Error())
		default:
			md, _ := json.Marshal(meta)
			writeJSON(w, map[string]any{"metadata-location": loc, "metadata": json.RawMessage(md)})
		}
	default:
		return false
	}
	return true
}
