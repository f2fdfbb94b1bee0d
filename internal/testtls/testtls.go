// Package testtls makes a certificate authority and a server certificate it
// signs for loopback at test time, for the tests that serve TLS.
package testtls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs is an authority and the server certificate it signed, as PEM and as
// files.
type Certs struct {
	CA   []byte // the authority's certificate: what clients trust
	Cert []byte // the server's certificate, valid for the hosts of Hosts
	Key  []byte // the server's private key (PKCS #8)

	// CAFile, CertFile and KeyFile hold CA, Cert and Key.
	CAFile, CertFile, KeyFile string
}

// Hosts are the names and addresses the server certificate is valid for.
var Hosts = []string{"localhost", "127.0.0.1", "::1"}

// New writes a fresh authority and server certificate under t's temporary
// directory, valid from an hour ago for a day.
func New(t testing.TB) *Certs {
	t.Helper()
	c, err := Write(t.TempDir(), time.Now())
	if err != nil {
		t.Fatalf("testtls: %v", err)
	}
	return c
}

// Write makes an authority and a server certificate valid from an hour
// before now for a day, and writes them to dir as ca.pem, cert.pem and
// key.pem (the key readable by its owner only).
func Write(dir string, now time.Time) (*Certs, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("authority key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "servingsnap test authority"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("authority certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("authority certificate: %w", err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("server key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("server key: %w", err)
	}

	c := &Certs{
		CA:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		Cert:     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:      pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "cert.pem"),
		KeyFile:  filepath.Join(dir, "key.pem"),
	}
	err = errors.Join(
		os.WriteFile(c.CAFile, c.CA, 0o644),
		os.WriteFile(c.CertFile, c.Cert, 0o644),
		os.WriteFile(c.KeyFile, c.Key, 0o600),
	)
	if err != nil {
		return nil, fmt.Errorf("write certificates: %w", err)
	}
	return c, nil
}

// Pool is a certificate pool holding the authority alone.
func (c *Certs) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(c.CA) {
		panic("testtls: the authority's PEM does not parse") // Write made it
	}
	return p
}

// ClientConfig is a client's TLS configuration that trusts the authority
// alone; the server name is the dialled host's.
func (c *Certs) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: c.Pool(), MinVersion: tls.VersionTLS12}
}
