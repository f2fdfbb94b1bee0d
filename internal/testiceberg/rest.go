package testiceberg

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// RESTCatalog is an Iceberg REST catalog (the Iceberg REST OpenAPI
// specification: GET /v1/config, POST /v1/oauth/tokens,
// GET /v1/{prefix}/namespaces/{namespace}/tables/{table}, and the writes of
// restwrite.go) over a warehouse that Write filled: enough for a client
// that loads a table or publishes one, and strict
// where a client could go wrong: every request but the token exchange must
// carry the bearer token, the warehouse must be the one configured, and an
// unknown table is the specification's NoSuchTableException.
//
// It stands in for a catalog server in tests: no REST catalog server is
// served here as a package, and the Java reference fixture needs Hadoop.
type RESTCatalog struct {
	Warehouse string // the warehouse directory; tables at Warehouse/<ns>/<name>
	Name      string // the warehouse name clients must ask for ("" accepts any)
	Token     string // the bearer token every request must carry
	// ClientID and Secret, when set, are exchanged for Token by the OAuth2
	// client-credentials flow.
	ClientID, Secret string

	mu       sync.Mutex
	requests []string
}

// Requests lists "METHOD path" of every request served, in order.
func (c *RESTCatalog) Requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.requests...)
}

type restError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    int    `json:"code"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, code int, typ, msg string) {
	var e restError
	e.Error.Message, e.Error.Type, e.Error.Code = msg, typ, code
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(e)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (c *RESTCatalog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.requests = append(c.requests, r.Method+" "+r.URL.Path)
	c.mu.Unlock()
	if r.Method == http.MethodPost && r.URL.Path == "/v1/oauth/tokens" {
		c.token(w, r)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+c.Token {
		writeError(w, http.StatusUnauthorized, "NotAuthorizedException", "Not authorized: a bearer token is required")
		return
	}
	if c.serveWrite(w, r) {
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/config":
		if wh := r.URL.Query().Get("warehouse"); c.Name != "" && wh != c.Name {
			writeError(w, http.StatusNotFound, "NoSuchWarehouseException", "no warehouse "+wh)
			return
		}
		writeJSON(w, map[string]any{"defaults": map[string]string{}, "overrides": map[string]string{}})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/namespaces/"):
		c.loadTable(w, r)
	default:
		writeError(w, http.StatusNotFound, "NotFoundException", "not served by this test catalog: "+r.Method+" "+r.URL.Path)
	}
}

func (c *RESTCatalog) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" ||
		c.ClientID == "" || r.PostForm.Get("client_id") != c.ClientID || r.PostForm.Get("client_secret") != c.Secret {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": "unknown client credentials"})
		return
	}
	writeJSON(w, map[string]string{
		"access_token":      c.Token,
		"token_type":        "bearer",
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
	})
}

// loadTable answers GET /v1/namespaces/{ns}/tables/{name} with the table's
// current metadata, read from its version hint as the filesystem catalog
// wrote it.
func (c *RESTCatalog) loadTable(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1/namespaces/")
	ns, name, ok := strings.Cut(rest, "/tables/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		writeError(w, http.StatusNotFound, "NotFoundException", "not served by this test catalog: "+r.URL.Path)
		return
	}
	// Multi-level namespaces are joined by the unit separator (0x1F).
	dir := filepath.Join(append([]string{c.Warehouse}, append(strings.Split(ns, "\x1f"), name)...)...)
	hint, err := os.ReadFile(filepath.Join(dir, "metadata", "version-hint.text"))
	if err != nil {
		writeError(w, http.StatusNotFound, "NoSuchTableException", "Table does not exist: "+strings.ReplaceAll(ns, "\x1f", ".")+"."+name)
		return
	}
	loc := filepath.Join(dir, "metadata", "v"+strings.TrimSpace(string(hint))+".metadata.json")
	md, err := os.ReadFile(loc)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "ServiceFailureException", err.Error())
		return
	}
	writeJSON(w, map[string]any{"metadata-location": loc, "metadata": json.RawMessage(md), "config": map[string]string{}})
}
