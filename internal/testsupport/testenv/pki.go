package testenv

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"

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

// writeClientCA makes the CA the API server trusts for client certificates (--client-ca-file), so
// tests can authenticate with an identity of their choice exactly as a kubelet does: a certificate with
// CN=user and O=groups (ClientConfig).
func writeClientCA(dir string) (*clusterpki.CA, string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	ca, err := clusterpki.NewCA("slipway-test-client-ca", time.Now(), 7*24*time.Hour)
	if err != nil {
		return nil, "", err
	}
	path := filepath.Join(dir, "client-ca.crt")
	return ca, path, os.WriteFile(path, []byte(ca.CertPEM), 0o600)
}

// ClientConfig is a client that authenticates with a client certificate for user in groups, signed by
// the API server's client CA, and with nothing else (no token, no impersonation): for a kubelet,
// CN=system:node:NAME and O=system:nodes, as the kubelet's own certificate.
func (cp *ControlPlane) ClientConfig(user string, groups ...string) (*rest.Config, error) {
	now := time.Now()
	cert, key, err := cp.clientCA.Issue(&x509.Certificate{
		Subject:   pkix.Name{CommonName: user, Organization: groups},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	return &rest.Config{Host: cp.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true, CertData: []byte(cert), KeyData: []byte(key)}}, nil
}
