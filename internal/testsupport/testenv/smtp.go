package testenv

import (
	"bufio"
	"crypto/x509"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/internal/clusterpki"
)

//go:embed smtpd.py
var smtpdScript []byte

// ErrNoSMTPServer is StartSMTP's error when Debian's python3-aiosmtpd is missing; tests skip on it.
var ErrNoSMTPServer = errors.New("no SMTP server to test against: /usr/bin/python3 with aiosmtpd is missing " +
	"(Debian package python3-aiosmtpd; hack/install-deps.sh installs it)")

// SMTPConfig is what StartSMTP runs.
type SMTPConfig struct {
	// TLS: "" or "none" (plain), "starttls" (STARTTLS offered and required before MAIL, AUTH only
	// after it), "implicit" (TLS from the first byte, as on port 465).
	TLS string
	// User and Password, when User is set, are the only credentials accepted, and AUTH is required.
	User, Password string
	// Mechanisms offered (default PLAIN, LOGIN and CRAM-MD5).
	Mechanisms []string
	// Refuse are recipients refused at RCPT TO (550).
	Refuse []string
}

// SMTPServer is a real SMTP server (aiosmtpd) a test started on a free loopback port.
type SMTPServer struct {
	Host string // 127.0.0.1
	Port int
	// Roots trusts its certificate (a CA made for it, the leaf naming 127.0.0.1 and localhost); nil
	// without TLS.
	Roots *x509.CertPool
	out   string
	stop  func()
}

// Mail is one message the server accepted.
type Mail struct {
	From      string   `json:"mail_from"`
	To        []string `json:"rcpt_tos"`
	Data      string   `json:"data"` // as received: headers, a blank line, the body (CRLF line ends)
	TLS       bool     `json:"tls"`
	Mechanism string   `json:"mechanism"` // the AUTH mechanism that succeeded ("": none)
	Login     string   `json:"login"`
	Helo      string   `json:"helo"`
}

// Stop stops it; safe to call twice.
func (s *SMTPServer) Stop() { s.stop() }

// Addr is host:port.
func (s *SMTPServer) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// Mails returns what it accepted so far, in order.
func (s *SMTPServer) Mails() ([]Mail, error) {
	files, err := filepath.Glob(filepath.Join(s.out, "*.json"))
	if err != nil {
		return nil, err
	}
	num := func(f string) int { n, _ := strconv.Atoi(strings.TrimSuffix(filepath.Base(f), ".json")); return n }
	slices.SortFunc(files, func(a, b string) int { return num(a) - num(b) })
	var mails []Mail
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var m Mail
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		mails = append(mails, m)
	}
	return mails, nil
}

// WaitMails waits until it has accepted n messages and returns them.
func (s *SMTPServer) WaitMails(n int, timeout time.Duration) ([]Mail, error) {
	deadline := time.Now().Add(timeout)
	for {
		mails, err := s.Mails()
		if err != nil || len(mails) >= n {
			return mails, err
		}
		if time.Now().After(deadline) {
			return mails, fmt.Errorf("the SMTP server accepted %d messages in %s, want %d", len(mails), timeout, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StartSMTP runs aiosmtpd on a free loopback port as c says, keeping its files in dir, and waits
// until it listens.
func StartSMTP(dir string, c SMTPConfig) (*SMTPServer, error) {
	if err := RefuseUnderShort("an SMTP server (aiosmtpd)"); err != nil {
		return nil, err
	}
	const python = "/usr/bin/python3" // Debian's, where python3-aiosmtpd installs (not a pyenv shim)
	if err := exec.Command(python, "-c", "import aiosmtpd").Run(); err != nil {
		return nil, ErrNoSMTPServer
	}
	script := filepath.Join(dir, "smtpd.py")
	out := filepath.Join(dir, "mail")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(script, smtpdScript, 0o644); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &SMTPServer{Host: "127.0.0.1", Port: port, out: out}
	args := []string{script, "--port", strconv.Itoa(port), "--out", out, "--user", c.User, "--password", c.Password,
		"--refuse", strings.Join(c.Refuse, ",")}
	if len(c.Mechanisms) > 0 {
		args = append(args, "--mechanisms", strings.Join(c.Mechanisms, ","))
	}
	if c.TLS != "" && c.TLS != "none" {
		ca, err := clusterpki.NewCA("slipway-test-smtp-ca", time.Now(), 24*time.Hour)
		if err != nil {
			return nil, err
		}
		cert, key, err := ca.Issue(&x509.Certificate{
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		if err != nil {
			return nil, err
		}
		certFile, keyFile := filepath.Join(dir, "smtpd.crt"), filepath.Join(dir, "smtpd.key")
		if err := os.WriteFile(certFile, []byte(cert), 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(keyFile, []byte(key), 0o600); err != nil {
			return nil, err
		}
		s.Roots = x509.NewCertPool()
		s.Roots.AddCert(ca.Cert)
		args = append(args, "--tls", c.TLS, "--cert", certFile, "--key", keyFile)
	}
	logf, err := os.Create(filepath.Join(dir, "smtpd.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(python, args...)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	exited := make(chan struct{})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := sc.Scan() && strings.HasPrefix(sc.Text(), "ready ")
		ready <- ok
		for sc.Scan() {
		}
	}()
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	s.stop = stopper(cmd, exited)
	fail := func(why string) error {
		s.stop()
		log, _ := os.ReadFile(filepath.Join(dir, "smtpd.log"))
		return fmt.Errorf("the SMTP server (aiosmtpd) %s:\n%s", why, log)
	}
	select {
	case ok := <-ready:
		if !ok {
			return nil, fail("exited at start")
		}
		return s, nil
	case <-time.After(60 * time.Second):
		return nil, fail("did not say ready within 60s")
	}
}
