package testenv

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/slipway-dev/slipway/internal/clusterpki"
)

type pkiFiles struct{ caCert, cert, key string }

// writePKI makes a cluster CA and an apiserver serving certificate valid for ips (VMs reach the host's
// loopback as 10.0.2.2, so that address must be in the certificate for in-cluster clients to verify it).
func writePKI(dir string, ips []string) (pkiFiles, error) {
	f := pkiFiles{caCert: filepath.Join(dir, "ca.crt"), cert: filepath.Join(dir, "apiserver.crt"), key: filepath.Join(dir, "apiserver.key")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return f, err
	}
	now := time.Now()
	ca, err := clusterpki.NewCA("slipway-test-ca", now, 7*24*time.Hour)
	if err != nil {
		return f, err
	}
	srv := &x509.Certificate{
		Subject:   pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("10.0.0.1")},
	}
	for _, ip := range ips {
		srv.IPAddresses = append(srv.IPAddresses, net.ParseIP(ip))
	}
	cert, key, err := ca.Issue(srv)
	if err != nil {
		return f, err
	}
	for path, data := range map[string]string{f.caCert: ca.CertPEM, f.cert: cert, f.key: key} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			return f, err
		}
	}
	return f, nil
}
