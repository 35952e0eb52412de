// Package clusterpki makes the secrets a new kubeadm cluster from terraform/ is given instead of
// generating them on the controller: with the CA known up front, workers verify the controller
// (discovery file, no unsafe skip) and the admin kubeconfig is a Terraform output, never copied off a
// node over SSH.
package clusterpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// Secrets are Terraform variables (see terraform/modules/flatcar-libvirt).
type Secrets struct {
	CACert         string `json:"ca_cert_pem"`
	CAKey          string `json:"ca_key_pem"`
	AdminCert      string `json:"admin_cert_pem"`
	AdminKey       string `json:"admin_key_pem"`
	BootstrapToken string `json:"bootstrap_token"`
}

// CA is a certificate authority: a self-signed certificate, its key, and both as PEM.
type CA struct {
	Cert            *x509.Certificate
	Key             *ecdsa.PrivateKey
	CertPEM, KeyPEM string
}

// NewCA makes an ECDSA P-256 CA named cn, valid from an hour before now (clock skew) for validity.
func NewCA(cn string, now time.Time, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	ca := &CA{Key: key, CertPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
	if ca.Cert, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	if ca.KeyPEM, err = keyPEM(key); err != nil {
		return nil, err
	}
	return ca, nil
}

// Issue signs leaf (its serial number is filled in) for a new P-256 key; it returns the certificate
// and the key as PEM.
func (ca *CA) Issue(leaf *x509.Certificate) (certPEM, leafKeyPEM string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	leaf.SerialNumber = serial()
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return "", "", err
	}
	if leafKeyPEM, err = keyPEM(key); err != nil {
		return "", "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), leafKeyPEM, nil
}

// New makes a CA valid for validity from now, an admin certificate (system:masters) valid for a year
// at most, and a bootstrap token.
func New(now time.Time, validity time.Duration) (*Secrets, error) {
	ca, err := NewCA("kubernetes", now, validity)
	if err != nil {
		return nil, err
	}
	adminValidity := validity
	if adminValidity > 365*24*time.Hour {
		adminValidity = 365 * 24 * time.Hour
	}
	adminCert, adminKey, err := ca.Issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "slipway-admin", Organization: []string{"system:masters"}},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(adminValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	return &Secrets{
		CACert: ca.CertPEM, CAKey: ca.KeyPEM, AdminCert: adminCert, AdminKey: adminKey,
		BootstrapToken: token(6) + "." + token(16),
	}, nil
}

func keyPEM(k *ecdsa.PrivateKey) (string, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return "", fmt.Errorf("marshal key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// token is n characters of [a-z0-9], as kubeadm's bootstrap tokens are.
func token(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		v, _ := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		b[i] = alphabet[v.Int64()]
	}
	return string(b)
}
