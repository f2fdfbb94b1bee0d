package testtls

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"
)

// TestCertsVerify: the server certificate verifies against the authority
// for every host of Hosts and for no other name, and the files hold what
// the fields do.
func TestCertsVerify(t *testing.T) {
	c := New(t)
	pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		t.Fatalf("the written pair: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"localhost", true}, {"127.0.0.1", true}, {"::1", true},
		{"example.com", false}, {"127.0.0.2", false},
	} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: c.Pool(), DNSName: tc.host})
		if (err == nil) != tc.ok {
			t.Errorf("verify for %s: %v, want ok=%v", tc.host, err, tc.ok)
		}
	}
	// Another authority does not vouch for it.
	other := New(t)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: other.Pool(), DNSName: "localhost"}); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("verify against another authority: %v", err)
	}
	// Expired a day later.
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: c.Pool(), DNSName: "localhost", CurrentTime: time.Now().Add(25 * time.Hour)}); err == nil {
		t.Error("the certificate verifies after a day")
	}
}
