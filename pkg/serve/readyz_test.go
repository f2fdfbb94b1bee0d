package serve

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestReadyzAndBuildMetrics: /readyz is 200 with datasets and 503 without;
// build_info carries the version, and snapshot_created_timestamp_seconds
// each dataset's manifest time (to alert on stale data).
func TestReadyzAndBuildMetrics(t *testing.T) {
	srv := startServer(t, Config{HTTPAddr: "127.0.0.1:0", Options: Options{Version: "v9.9.9-test"}})
	base := "http://" + srv.HTTPAddr().String()
	if code, body := httpGet(t, base+"/readyz"); code != 200 || !strings.Contains(body, `"status":"ready"`) || !strings.Contains(body, `"SYN"`) {
		t.Errorf("readyz %d %s", code, body)
	}
	_, metrics := httpGet(t, base+"/metrics")
	if !regexp.MustCompile(`servingsnap_build_info\{goversion="go[^"]+",version="v9.9.9-test"\} 1`).MatchString(metrics) {
		t.Errorf("/metrics lacks servingsnap_build_info with the version")
	}
	m := regexp.MustCompile(`servingsnap_snapshot_created_timestamp_seconds\{dataset="SYN"\} (\S+)`).FindStringSubmatch(metrics)
	if m == nil {
		t.Fatal("/metrics lacks servingsnap_snapshot_created_timestamp_seconds for SYN")
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if age := time.Since(time.Unix(int64(v), 0)); err != nil || age < 0 || age > 24*time.Hour {
		t.Errorf("created timestamp %s (age %s): want the fixture's build time", m[1], age)
	}

	empty := startServer(t, Config{Root: t.TempDir(), HTTPAddr: "127.0.0.1:0"})
	if code, body := httpGet(t, "http://"+empty.HTTPAddr().String()+"/readyz"); code != 503 || !strings.Contains(body, "no datasets") {
		t.Errorf("readyz of an empty root: %d %s", code, body)
	}
}
