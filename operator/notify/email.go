package notify

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	netsmtp "net/smtp"
	"net/textproto"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nicholas-fedor/shoutrrr/pkg/services/email/smtp"
	"github.com/nicholas-fedor/shoutrrr/pkg/types"
)

// email is smtp://, sent here with Go's net/smtp. Its URL is read by shoutrrr's own smtp.Config, so
// every smtp:// URL a kured user has means what it meant there (host, port, user and password;
// fromaddress, fromname, toaddresses, subject, auth, encryption, usestarttls, requirestarttls,
// usehtml, clienthost, skiptlsverify, timeout). Only the sending is Slipway's, because shoutrrr's
// executes text/template (services.go says what that costs). It differs from shoutrrr's where
// shoutrrr's is unsafe or unbounded, each covered by a test in email_test.go:
//   - the send timeout bounds the whole exchange (dial, TLS, AUTH, DATA, QUIT), not just the dial: a
//     server that stops answering mid-session fails the send at the timeout;
//   - one message to every recipient (one transaction, the To: header names them all), not one per
//     recipient; a refused recipient fails the send, naming it, while the others still get it;
//   - the subject and names are MIME-encoded and stripped of line breaks (no header injection), the
//     body is quoted-printable (any text, any line length), the HTML part is escaped;
//   - credentials never cross an unencrypted connection except to localhost (net/smtp's rule for
//     PLAIN, applied to LOGIN, CRAM-MD5 and XOAUTH2 too), and encryption=ExplicitTLS fails when the
//     server offers no STARTTLS instead of sending in clear (and is refused with usestarttls=No);
//   - auth=Plain uses AUTH PLAIN where offered and AUTH LOGIN where only that is (Office 365 and
//     others offer LOGIN).
type email struct {
	cfg     smtp.Config
	timeout time.Duration  // the sender's: the whole exchange (the URL's timeout too, if shorter)
	roots   *x509.CertPool // whom TLS trusts; nil: the system's roots
	log     types.StdLogger
	// warn logs what weakens the mail's protection (no STARTTLS, an unverified certificate) where it
	// is seen by default, not at the services' debug level (nil: to log).
	warn types.StdLogger
}

func (m *email) warning(msg string) {
	switch {
	case m.warn != nil:
		m.warn.Print(msg)
	case m.log != nil:
		m.log.Print(msg)
	}
}

func (m *email) Initialize(u *url.URL, log types.StdLogger) error {
	// shoutrrr's smtp.Service.Initialize starts from these values, then reads the URL.
	m.cfg = smtp.Config{
		Port:        smtp.DefaultSMTPPort,
		Auth:        smtp.AuthTypes.Unknown,
		UseStartTLS: true,
		Encryption:  smtp.EncMethods.Auto,
		ClientHost:  "localhost",
		Timeout:     smtp.DefaultTimeout * time.Second,
	}
	if err := m.cfg.SetURL(u); err != nil {
		return err
	}
	m.log = log
	c := &m.cfg
	c.FixEmailTags() // a '+' in an address arrives as a space from the query
	if c.Auth == smtp.AuthTypes.Unknown {
		c.Auth = smtp.AuthTypes.None
		if c.Username != "" {
			c.Auth = smtp.AuthTypes.Plain
		}
	}
	if c.Host == "" {
		return errors.New("no mail server host")
	}
	if c.Port == 0 {
		return errors.New("mail server port 0")
	}
	if c.Timeout <= 0 {
		return fmt.Errorf("timeout %s: want more than 0", c.Timeout)
	}
	if c.Encryption == smtp.EncMethods.ExplicitTLS && !c.UseStartTLS {
		return errors.New("the encryption asked for is STARTTLS, and usestarttls=No refuses it: drop one of them")
	}
	if c.Auth != smtp.AuthTypes.None && c.Username == "" {
		return fmt.Errorf("auth=%s needs a user name (smtp://user:password@host)", c.Auth)
	}
	if _, err := address(c.FromAddress); err != nil {
		return fmt.Errorf("fromaddress: %w", err)
	}
	for _, to := range c.ToAddresses {
		if _, err := address(to); err != nil {
			return fmt.Errorf("toaddresses: %w", err)
		}
	}
	if c.SkipTLSVerify {
		m.warning("Warning: skiptlsverify=Yes: the mail server's TLS certificate is not verified")
	}
	return nil
}

// address checks one bare e-mail address (no display name, no line break).
func address(s string) (string, error) {
	a, err := mail.ParseAddress(s)
	if err != nil {
		return "", fmt.Errorf("%q is not an e-mail address: %v", s, err)
	}
	if a.Name != "" || a.Address != s {
		return "", fmt.Errorf("%q: want a bare address, without a name (fromname= names the sender)", s)
	}
	return a.Address, nil
}

func (m *email) implicitTLS() bool {
	switch m.cfg.Encryption {
	case smtp.EncMethods.ImplicitTLS:
		return true
	case smtp.EncMethods.Auto:
		return m.cfg.Port == smtp.ImplicitTLSPort
	}
	return false
}

func (m *email) tlsConfig() *tls.Config {
	return &tls.Config{
		ServerName:         m.cfg.Host,
		RootCAs:            m.roots,
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: m.cfg.SkipTLSVerify, //nolint:gosec // the user's explicit skiptlsverify=Yes, warned at start
	}
}

// Send delivers message to every recipient in one SMTP transaction.
func (m *email) Send(message string, _ *types.Params) error {
	c := &m.cfg
	timeout := c.Timeout
	if m.timeout > 0 && m.timeout < timeout {
		timeout = m.timeout
	}
	deadline := time.Now().Add(timeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	addr := net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))
	var conn net.Conn
	var err error
	if m.implicitTLS() {
		conn, err = (&tls.Dialer{Config: m.tlsConfig()}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return fmt.Errorf("connecting to the mail server: %w", err)
	}
	// Every read and write of the session after this point ends at the deadline.
	if err := conn.SetDeadline(deadline); err != nil {
		conn.Close()
		return err
	}
	step := "greeting"
	wrap := func(err error) error {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("mail server at %s: no answer within the send timeout (%s) during %s", addr, timeout, step)
		}
		return fmt.Errorf("mail server at %s, %s: %w", addr, step, err)
	}
	client, err := netsmtp.NewClient(conn, c.Host)
	if err != nil {
		conn.Close()
		return wrap(err)
	}
	defer client.Close()
	step = "EHLO"
	if err := client.Hello(m.clientHost()); err != nil {
		return wrap(err)
	}
	encrypted := m.implicitTLS()
	if !encrypted && c.UseStartTLS {
		step = "STARTTLS"
		if ok, _ := client.Extension("STARTTLS"); ok {
			if err := client.StartTLS(m.tlsConfig()); err != nil {
				return wrap(err)
			}
			encrypted = true
		} else if c.RequireStartTLS || c.Encryption == smtp.EncMethods.ExplicitTLS {
			return wrap(errors.New("the server offers no STARTTLS, and the URL requires it (requirestarttls=Yes or encryption=ExplicitTLS)"))
		} else {
			m.warning("Warning: the mail server offers no STARTTLS: this message crosses the network unencrypted")
		}
	}
	if c.Auth != smtp.AuthTypes.None {
		step = "AUTH"
		auth, err := m.auth(client, encrypted)
		if err != nil {
			return wrap(err)
		}
		if err := client.Auth(auth); err != nil {
			return wrap(err)
		}
	}
	step = "MAIL FROM"
	if err := client.Mail(c.FromAddress); err != nil {
		return wrap(err)
	}
	step = "RCPT TO"
	var accepted []string
	var refused []error
	for _, to := range c.ToAddresses {
		if err := client.Rcpt(to); err != nil {
			var pe *textproto.Error
			if !errors.As(err, &pe) {
				return wrap(err) // the connection, not the recipient
			}
			refused = append(refused, fmt.Errorf("%s: %v", to, err))
			continue
		}
		accepted = append(accepted, to)
	}
	if len(accepted) == 0 {
		return wrap(fmt.Errorf("every recipient refused: %w", errors.Join(refused...)))
	}
	step = "DATA"
	body, err := m.compose(message, time.Now())
	if err != nil {
		return err
	}
	w, err := client.Data()
	if err != nil {
		return wrap(err)
	}
	if _, err := w.Write(body); err != nil {
		return wrap(err)
	}
	if err := w.Close(); err != nil {
		return wrap(err)
	}
	step = "QUIT"
	if err := client.Quit(); err != nil {
		// Delivered already (the server accepted the DATA); some servers close early (Office 365).
		if m.log != nil {
			m.log.Printf("Warning: closing the mail session: %v (the message was accepted)", err)
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("mail server at %s delivered to %d of %d recipients; refused: %w",
			addr, len(accepted), len(c.ToAddresses), errors.Join(refused...))
	}
	return nil
}

func (m *email) clientHost() string {
	if m.cfg.ClientHost != "auto" {
		return m.cfg.ClientHost
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "localhost"
}

// auth picks the mechanism auth= names, among those the server offers.
func (m *email) auth(client *netsmtp.Client, encrypted bool) (netsmtp.Auth, error) {
	c := &m.cfg
	ok, offered := client.Extension("AUTH")
	if !ok {
		if !encrypted {
			return nil, errors.New("the server offers no AUTH on this unencrypted session (servers offer it after STARTTLS; " +
				"leave usestarttls on, or use port 465)")
		}
		return nil, fmt.Errorf("the server offers no AUTH, and the URL asks for auth=%s (auth=None if it needs none)", c.Auth)
	}
	mechs := strings.Fields(strings.ToUpper(offered))
	switch c.Auth {
	case smtp.AuthTypes.Plain:
		if slices.Contains(mechs, "PLAIN") {
			return netsmtp.PlainAuth("", c.Username, c.Password, c.Host), nil
		}
		if slices.Contains(mechs, "LOGIN") {
			return &loginAuth{user: c.Username, password: c.Password, host: c.Host}, nil
		}
		return nil, fmt.Errorf("the server offers AUTH %s, not PLAIN or LOGIN (auth=CRAMMD5 or auth=OAuth2 then)", offered)
	case smtp.AuthTypes.CRAMMD5:
		// Its answer can be cracked offline: only over TLS too (or to localhost), like the others.
		return guarded{netsmtp.CRAMMD5Auth(c.Username, c.Password), c.Host}, nil
	case smtp.AuthTypes.OAuth2:
		return &xoauth2{user: c.Username, token: c.Password, host: c.Host}, nil
	}
	return nil, fmt.Errorf("auth=%s is not a mechanism (None, Plain, CRAMMD5, OAuth2)", c.Auth)
}

// compose writes the message: headers and a quoted-printable body (and an escaped HTML part with
// usehtml=Yes). now dates it.
func (m *email) compose(message string, now time.Time) ([]byte, error) {
	c := &m.cfg
	var b bytes.Buffer
	header := func(name, value string) { b.WriteString(name + ": " + value + "\r\n") }
	header("From", (&mail.Address{Name: oneLine(c.FromName), Address: c.FromAddress}).String())
	var to []string
	for _, a := range c.ToAddresses {
		to = append(to, (&mail.Address{Address: a}).String())
	}
	header("To", strings.Join(to, ", "))
	subject := oneLine(c.Subject)
	if subject == "" {
		subject = cut(oneLine(message), 120)
	}
	header("Subject", mime.QEncoding.Encode("utf-8", subject))
	header("Date", now.Format(time.RFC1123Z))
	id := make([]byte, 12)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	header("Message-ID", "<"+hex.EncodeToString(id)+"@"+oneLine(m.clientHost())+">")
	header("MIME-Version", "1.0")
	if !c.UseHTML {
		header("Content-Type", `text/plain; charset="UTF-8"`)
		header("Content-Transfer-Encoding", "quoted-printable")
		b.WriteString("\r\n")
		if err := qp(&b, message); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	}
	parts := multipart.NewWriter(&b)
	header("Content-Type", `multipart/alternative; boundary="`+parts.Boundary()+`"`)
	b.WriteString("\r\n")
	for _, p := range []struct{ kind, text string }{
		{"plain", message},
		{"html", "<pre>" + html.EscapeString(message) + "</pre>"},
	} {
		w, err := parts.CreatePart(textproto.MIMEHeader{
			"Content-Type":              {`text/` + p.kind + `; charset="UTF-8"`},
			"Content-Transfer-Encoding": {"quoted-printable"},
		})
		if err != nil {
			return nil, err
		}
		if err := qp(w, p.text); err != nil {
			return nil, err
		}
	}
	if err := parts.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func qp(w interface{ Write([]byte) (int, error) }, text string) error {
	q := quotedprintable.NewWriter(w)
	if _, err := q.Write([]byte(text)); err != nil {
		return err
	}
	return q.Close()
}

// oneLine replaces line breaks (and other control characters) with spaces: a header value.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// loginAuth is AUTH LOGIN (the server asks for the user name, then the password), under net/smtp's
// rule for PLAIN: only on an encrypted connection, or to localhost.
type loginAuth struct {
	user, password, host string
	step                 int
}

func (a *loginAuth) Start(server *netsmtp.ServerInfo) (string, []byte, error) {
	if err := credentialsMayCross(server, a.host); err != nil {
		return "", nil, err
	}
	a.step = 0
	return "LOGIN", nil, nil
}

func (a *loginAuth) Next(_ []byte, more bool) ([]byte, error) {
	if !more {
		return nil, nil
	}
	a.step++
	switch a.step {
	case 1:
		return []byte(a.user), nil
	case 2:
		return []byte(a.password), nil
	}
	return nil, errors.New("AUTH LOGIN: the server asked for more than a user name and a password")
}

// xoauth2 is AUTH XOAUTH2 (Google's and Microsoft's bearer-token SASL), the password holding the token.
type xoauth2 struct{ user, token, host string }

func (a *xoauth2) Start(server *netsmtp.ServerInfo) (string, []byte, error) {
	if err := credentialsMayCross(server, a.host); err != nil {
		return "", nil, err
	}
	return "XOAUTH2", []byte("user=" + a.user + "\x01auth=Bearer " + a.token + "\x01\x01"), nil
}

// Next answers a failure's JSON challenge with an empty line, as the mechanism says, so the server
// sends its final error.
func (a *xoauth2) Next(_ []byte, more bool) ([]byte, error) {
	if more {
		return []byte{}, nil
	}
	return nil, nil
}

// guarded is an Auth under credentialsMayCross.
type guarded struct {
	netsmtp.Auth
	host string
}

func (g guarded) Start(server *netsmtp.ServerInfo) (string, []byte, error) {
	if err := credentialsMayCross(server, g.host); err != nil {
		return "", nil, err
	}
	return g.Auth.Start(server)
}

// credentialsMayCross is net/smtp's PlainAuth rule: credentials go only over TLS, or to localhost.
func credentialsMayCross(server *netsmtp.ServerInfo, host string) error {
	if server.Name != host {
		return errors.New("wrong host name")
	}
	if !server.TLS && server.Name != "localhost" && server.Name != "127.0.0.1" && server.Name != "::1" {
		return errors.New("unencrypted connection: credentials are sent only over TLS (STARTTLS or port 465)")
	}
	return nil
}
