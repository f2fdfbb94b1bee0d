package lint

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestOpsExamples checks what examples/ops promises operators:
// every ExecStart of the server (`snapserve`, or `snapbuild serve`) in a
// unit, active or in a comment,
// binds loopback unless it configures TLS; TimeoutStopSec leaves the
// server's --shutdown-timeout (plus the few seconds it takes to end stuck
// streams) to running streams; nightly.sh writes nothing into the served
// root.
func TestOpsExamples(t *testing.T) {
	root, _ := moduleRoot(t)
	dir := filepath.Join(root, "examples", "ops")
	b, err := os.ReadFile(filepath.Join(dir, "servingsnap-serve.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	// Join continued lines (comment continuations included).
	joined := regexp.MustCompile(`\\\n#?\s*`).ReplaceAllString(unit, " ")
	serves := regexp.MustCompile(`(?m)^#?\s*ExecStart=(\S*(?:snapserve|snapbuild serve) .*)$`).FindAllStringSubmatch(joined, -1)
	if len(serves) == 0 {
		t.Fatal("servingsnap-serve.service runs no server (snapserve or snapbuild serve)")
	}
	stopTimeout := time.Duration(0)
	if m := regexp.MustCompile(`(?m)^TimeoutStopSec=(\d+)$`).FindStringSubmatch(unit); m != nil {
		stopTimeout, _ = time.ParseDuration(m[1] + "s")
	} else {
		t.Error("servingsnap-serve.service sets no TimeoutStopSec")
	}
	for _, m := range serves {
		cmd := m[1]
		addr := flagValue(cmd, "--addr", "127.0.0.1:8815")
		tls := strings.Contains(cmd, "--tls-cert") && strings.Contains(cmd, "--tls-key")
		if !tls && !strings.HasPrefix(addr, "127.") && !strings.HasPrefix(addr, "[::1]") && !strings.HasPrefix(addr, "localhost:") {
			t.Errorf("%s: binds %s without TLS", cmd, addr)
		}
		grace, err := time.ParseDuration(flagValue(cmd, "--shutdown-timeout", "30s"))
		if err != nil {
			t.Errorf("%s: --shutdown-timeout: %v", cmd, err)
		}
		// The server ends streams at the grace's end, waits 1 s, closes
		// stuck connections and waits up to 5 s more (pkg/serve Serve).
		if need := grace + 6*time.Second; stopTimeout <= need {
			t.Errorf("TimeoutStopSec=%s does not exceed --shutdown-timeout %s plus the 6 s of ending streams", stopTimeout, grace)
		}
	}

	script, err := os.ReadFile(filepath.Join(dir, "nightly.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(script), "\n") {
		if i := strings.Index(line, ">"); i >= 0 && !strings.HasPrefix(strings.TrimSpace(line), "#") {
			target := strings.TrimSpace(line[i+1:])
			if strings.HasPrefix(target, `"$dataset`) || strings.HasPrefix(target, "$dataset") {
				t.Errorf("nightly.sh writes into the served root: %s", line)
			}
		}
	}
}

// flagValue is the value of flag in a command line, or def.
func flagValue(cmd, flag, def string) string {
	f := strings.Fields(cmd)
	for i, a := range f {
		if a == flag && i+1 < len(f) {
			return f[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return def
}
