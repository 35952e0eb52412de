package notify

import (
	"bufio"
	"context"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	netsmtp "net/smtp"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

func newEmail(t *testing.T, raw string) *email {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	m := &email{}
	if err := m.Initialize(u, nil); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return m
}

// readBody decodes a composed message's text/plain body (and, for multipart, the HTML part).
func readBody(t *testing.T, raw []byte) (msg *mail.Message, plain, htmlPart string) {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatalf("not a message: %v\n%s", err, raw)
	}
	ct, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	if ct == "text/plain" {
		if te := msg.Header.Get("Content-Transfer-Encoding"); te != "quoted-printable" {
			t.Errorf("Content-Transfer-Encoding %q", te)
		}
		b, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
		if err != nil {
			t.Fatal(err)
		}
		return msg, text(string(b)), ""
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := r.NextPart() // decodes quoted-printable itself
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		switch p.Header.Get("Content-Type") {
		case `text/plain; charset="UTF-8"`:
			plain = string(b)
		case `text/html; charset="UTF-8"`:
			htmlPart = string(b)
		default:
			t.Errorf("part %q", p.Header.Get("Content-Type"))
		}
	}
	return msg, text(plain), text(htmlPart)
}

// text is a decoded body as the sender wrote it: mail's text lines end in CRLF, and DATA ends the last.
func text(s string) string { return strings.TrimSuffix(strings.ReplaceAll(s, "\r\n", "\n"), "\n") }

// The message is well formed whatever the text: no header a URL or a message can add, a subject in
// MIME words, every byte of the body back after decoding, the HTML part escaped.
func TestEmailCompose(t *testing.T) {
	now := time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", 300) + "\n.\n.. starts with dots\nnode ö: <b>&</b>"
	for _, c := range []struct {
		url, message, subject string
	}{
		{"smtp://mail.example/?from=ops@example.com&to=a@example.com,b+tag@example.com", "node a: reboot finished", "node a: reboot finished"},
		// fromname with a line break and a subject with one: both stay one header each.
		{"smtp://mail.example/?from=ops@example.com&to=a@example.com&fromname=Slip%0d%0aBcc:%20x@evil.example&subject=Flatcar%0d%0aBcc:%20y@evil.example%20%C3%BCber", long, "Flatcar  Bcc: y@evil.example über"},
		{"smtp://mail.example/?from=ops@example.com&to=a@example.com&usehtml=Yes", long, cut(oneLine(long), 120)},
	} {
		m := newEmail(t, c.url)
		raw, err := m.compose(c.message, now)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.ReplaceAll(string(raw), "\r\n", ""), "\n") {
			t.Errorf("%s: a bare line feed in the message", c.url)
		}
		msg, plain, htmlPart := readBody(t, raw)
		for _, h := range []string{"Bcc", "Cc"} {
			if v := msg.Header.Get(h); v != "" {
				t.Errorf("%s: a %s header %q", c.url, h, v)
			}
		}
		subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
		if err != nil || subject != c.subject {
			t.Errorf("%s: subject %q (%v), want %q", c.url, subject, err, c.subject)
		}
		if got := msg.Header.Get("Date"); got != "Fri, 27 Nov 2026 22:00:00 +0000" {
			t.Errorf("Date %q", got)
		}
		if plain != c.message {
			t.Errorf("%s: body decodes to %q, want %q", c.url, plain, c.message)
		}
		if m.cfg.UseHTML && htmlPart != "<pre>"+strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(c.message, "&", "&amp;"), "<", "&lt;"), ">", "&gt;")+"</pre>" {
			t.Errorf("HTML part %q", htmlPart)
		}
		to, err := msg.Header.AddressList("To")
		if err != nil || len(to) != len(m.cfg.ToAddresses) {
			t.Errorf("To %v (%v), want %v", to, err, m.cfg.ToAddresses)
		}
	}
	// A '+' in an address arrives from the query as a space; it is an address's '+' again.
	if m := newEmail(t, "smtp://h/?from=ops@example.com&to=b+tag@example.com"); m.cfg.ToAddresses[0] != "b+tag@example.com" {
		t.Errorf("to %q", m.cfg.ToAddresses)
	}
}

// Credentials never cross an unencrypted connection but to localhost, for every mechanism that
// sends them (net/smtp's rule for PLAIN, applied to LOGIN and XOAUTH2).
func TestEmailCredentialsOnlyOverTLS(t *testing.T) {
	for _, a := range []netsmtp.Auth{
		&loginAuth{user: "u", password: "p", host: "mail.example"},
		&xoauth2{user: "u", token: "t", host: "mail.example"},
		guarded{netsmtp.CRAMMD5Auth("u", "p"), "mail.example"},
	} {
		if _, _, err := a.Start(&netsmtp.ServerInfo{Name: "mail.example", TLS: false, Auth: []string{"LOGIN", "XOAUTH2"}}); err == nil || !strings.Contains(err.Error(), "unencrypted") {
			t.Errorf("%T over plain text to mail.example: %v", a, err)
		}
		if _, _, err := a.Start(&netsmtp.ServerInfo{Name: "other.example", TLS: true}); err == nil {
			t.Errorf("%T to another host than configured: accepted", a)
		}
		for _, ok := range []netsmtp.ServerInfo{{Name: "mail.example", TLS: true}} {
			if _, _, err := a.Start(&ok); err != nil {
				t.Errorf("%T over TLS: %v", a, err)
			}
		}
	}
	l := &loginAuth{user: "u", password: "p", host: "localhost"}
	if mech, _, err := l.Start(&netsmtp.ServerInfo{Name: "localhost"}); err != nil || mech != "LOGIN" {
		t.Fatalf("LOGIN to localhost: %q %v", mech, err)
	}
	for i, want := range []string{"u", "p"} {
		if got, err := l.Next([]byte("Username:"), true); err != nil || string(got) != want {
			t.Errorf("step %d: %q %v", i, got, err)
		}
	}
	if _, err := l.Next([]byte("More:"), true); err == nil {
		t.Error("a third question answered")
	}
}

// A server that stops answering fails the send at the send timeout, at whatever step it stops.
func TestEmailTimeoutBoundsTheSession(t *testing.T) {
	for _, c := range []struct {
		name  string
		serve func(conn net.Conn)
		step  string
	}{
		{"silent", func(conn net.Conn) {}, "greeting"},
		{"greets, then hangs", func(conn net.Conn) { io.WriteString(conn, "220 hello\r\n") }, "EHLO"},
		{"hangs at DATA", func(conn net.Conn) {
			r := bufio.NewReader(conn)
			io.WriteString(conn, "220 hello\r\n")
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				switch strings.ToUpper(strings.Fields(line)[0]) {
				case "EHLO":
					io.WriteString(conn, "250 hello\r\n")
				case "DATA":
					io.WriteString(conn, "354 go on\r\n")
					return // reads nothing more, answers nothing
				default:
					io.WriteString(conn, "250 OK\r\n")
				}
			}
		}, "DATA"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			held := make(chan net.Conn, 1)
			go func() {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				held <- conn
				c.serve(conn)
			}()
			m := newEmail(t, "smtp://"+l.Addr().String()+"/?from=ops@example.com&to=a@example.com&usestarttls=No&timeout=1h")
			m.timeout = 300 * time.Millisecond
			err = m.Send(strings.Repeat("a long message ", 1<<16), nil)
			if err == nil || !strings.Contains(err.Error(), "no answer within the send timeout (300ms) during "+c.step) {
				t.Errorf("send: %v", err)
			}
			select {
			case conn := <-held:
				conn.Close()
			default:
			}
		})
	}
}

// Against a real SMTP server (aiosmtpd): STARTTLS and implicit TLS, PLAIN, LOGIN and CRAM-MD5, several
// recipients in one transaction, a refused one named, bad credentials and an untrusted certificate
// refused, and what the server received decodes to the message.
func TestEmailDeliversToARealServer(t *testing.T) {
	testenv.NeedRealParts(t, "an SMTP server (aiosmtpd)")
	const message = "node worker-1: reboot finished (boot ID changed, Ready) in 4m12s; ünïcode <ok>"
	for _, c := range []struct {
		name      string
		server    testenv.SMTPConfig
		query     string // added to the URL
		untrusted bool   // do not trust the server's CA
		password  string // "" → the right one
		wantErr   string
		wantTLS   bool
		wantMech  string
		wantTo    []string
	}{
		{name: "STARTTLS, PLAIN", server: testenv.SMTPConfig{TLS: "starttls", User: "slipway", Password: "s3cret"},
			wantTLS: true, wantMech: "PLAIN", wantTo: []string{"a@example.com", "b@example.com"}},
		{name: "STARTTLS, only LOGIN offered", server: testenv.SMTPConfig{TLS: "starttls", User: "slipway", Password: "s3cret", Mechanisms: []string{"LOGIN"}},
			wantTLS: true, wantMech: "LOGIN", wantTo: []string{"a@example.com", "b@example.com"}},
		{name: "implicit TLS, CRAM-MD5", server: testenv.SMTPConfig{TLS: "implicit", User: "slipway", Password: "s3cret"},
			query: "&encryption=ImplicitTLS&auth=CRAMMD5", wantTLS: true, wantMech: "CRAM-MD5", wantTo: []string{"a@example.com", "b@example.com"}},
		{name: "plain, no auth", server: testenv.SMTPConfig{}, query: "&usestarttls=No",
			wantTo: []string{"a@example.com", "b@example.com"}},
		{name: "one recipient refused", server: testenv.SMTPConfig{TLS: "starttls", Refuse: []string{"b@example.com"}},
			wantErr: `delivered to 1 of 2 recipients; refused: b@example.com: 550 "5.1.1 no such user here"`, wantTLS: true, wantTo: []string{"a@example.com"}},
		{name: "wrong password", server: testenv.SMTPConfig{TLS: "starttls", User: "slipway", Password: "s3cret"},
			password: "wrong", wantErr: `AUTH: 535 "5.7.8 Authentication credentials invalid"`},
		{name: "untrusted certificate", server: testenv.SMTPConfig{TLS: "starttls", User: "slipway", Password: "s3cret"},
			untrusted: true, wantErr: "STARTTLS: tls: failed to verify certificate"},
		{name: "untrusted certificate, skiptlsverify", server: testenv.SMTPConfig{TLS: "starttls"},
			untrusted: true, query: "&skiptlsverify=Yes", wantTLS: true, wantTo: []string{"a@example.com", "b@example.com"}},
		{name: "STARTTLS required, usestarttls=No: no AUTH in clear", server: testenv.SMTPConfig{TLS: "starttls", User: "slipway", Password: "s3cret"},
			query: "&usestarttls=No", wantErr: "AUTH: the server offers no AUTH on this unencrypted session"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, err := testenv.StartSMTP(t.TempDir(), c.server)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop()
			user := ""
			if c.server.User != "" {
				pw := c.server.Password
				if c.password != "" {
					pw = c.password
				}
				user = url.UserPassword(c.server.User, pw).String() + "@"
			}
			m := newEmail(t, "smtp://"+user+srv.Addr()+"/?from=slipway@example.com&to=a@example.com,b@example.com&fromname=Slipway"+c.query)
			m.timeout = 30 * time.Second
			if !c.untrusted {
				m.roots = srv.Roots
			}
			err = m.Send(message, nil)
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("send: %v, want %q", err, c.wantErr)
			}
			mails, err := srv.Mails()
			if err != nil {
				t.Fatal(err)
			}
			if c.wantTo == nil {
				if len(mails) != 0 {
					t.Errorf("the server accepted %d messages", len(mails))
				}
				return
			}
			if len(mails) != 1 {
				t.Fatalf("the server accepted %d messages, want 1 (one transaction for every recipient)", len(mails))
			}
			got := mails[0]
			if got.TLS != c.wantTLS || got.Mechanism != c.wantMech || got.From != "slipway@example.com" || strings.Join(got.To, ",") != strings.Join(c.wantTo, ",") {
				t.Errorf("received tls=%v mechanism=%q from=%q to=%v; want tls=%v mechanism=%q to=%v", got.TLS, got.Mechanism, got.From, got.To, c.wantTLS, c.wantMech, c.wantTo)
			}
			if got.Helo != "localhost" {
				t.Errorf("EHLO %q, want localhost (clienthost's default)", got.Helo)
			}
			msg, plain, _ := readBody(t, []byte(got.Data))
			if plain != message {
				t.Errorf("body %q, want %q", plain, message)
			}
			if from := msg.Header.Get("From"); from != `"Slipway" <slipway@example.com>` {
				t.Errorf("From %q", from)
			}
		})
	}
}

// Through the Sender: a notification becomes a mail whose subject is the message, counted as sent.
func TestEmailNotification(t *testing.T) {
	testenv.NeedRealParts(t, "an SMTP server (aiosmtpd)")
	srv, err := testenv.StartSMTP(t.TempDir(), testenv.SMTPConfig{TLS: "starttls", User: "slipway", Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	s, err := New([]string{"smtp://slipway:pw@" + srv.Addr() + "/?from=slipway@example.com&to=ops@example.com&requirestarttls=Yes"},
		prometheus.NewRegistry(), klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	s.targets[0].svc.(*email).roots = srv.Roots
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	s.Notify(Event{Kind: KindCycleFinished, Node: "worker-1", Took: 252 * time.Second})
	mails, err := srv.WaitMails(1, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	msg, plain, _ := readBody(t, []byte(mails[0].Data))
	want := "node worker-1: reboot finished (boot ID changed, Ready) in 4m12s"
	if subject := msg.Header.Get("Subject"); subject != want || plain != want {
		t.Errorf("subject %q, body %q; want both %q", subject, plain, want)
	}
	for deadline := time.Now().Add(10 * time.Second); testutil.ToFloat64(s.sent) != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sent %v, failed %v", testutil.ToFloat64(s.sent), testutil.ToFloat64(s.failed))
		}
	}
}
