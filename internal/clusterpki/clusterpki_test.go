package clusterpki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"regexp"
	"testing"
	"time"
)

func TestSecretsChainAndShape(t *testing.T) {
	now := time.Now()
	s, err := New(now, 10*365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`).MatchString(s.BootstrapToken) {
		t.Errorf("bootstrap token %q is not kubeadm's shape", s.BootstrapToken)
	}
	if _, err := tls.X509KeyPair([]byte(s.CACert), []byte(s.CAKey)); err != nil {
		t.Fatalf("CA cert and key do not match: %v", err)
	}
	pair, err := tls.X509KeyPair([]byte(s.AdminCert), []byte(s.AdminKey))
	if err != nil {
		t.Fatalf("admin cert and key do not match: %v", err)
	}
	admin, _ := x509.ParseCertificate(pair.Certificate[0])
	block, _ := pem.Decode([]byte(s.CACert))
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil || !ca.IsCA {
		t.Fatalf("CA: %v %v", ca, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := admin.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("admin cert does not chain to the CA for client auth: %v", err)
	}
	if len(admin.Subject.Organization) != 1 || admin.Subject.Organization[0] != "system:masters" {
		t.Errorf("admin groups %v", admin.Subject.Organization)
	}
	if admin.NotAfter.After(now.Add(366 * 24 * time.Hour)) {
		t.Errorf("admin cert valid until %v: more than a year", admin.NotAfter)
	}
	if s2, _ := New(now, time.Hour); s2.BootstrapToken == s.BootstrapToken || s2.CAKey == s.CAKey {
		t.Error("two calls made the same secrets")
	}
}
