package httpserve

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

func serve(t *testing.T, l Limits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ServeWith(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "read %d\n", len(b))
	}), klog.Background(), l)
	return ln.Addr().String()
}

// closedWithin reports whether the server closes conn within d (a read returns EOF or an error).
func closedWithin(conn net.Conn, d time.Duration) bool {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.ReadAll(conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

// A client that sends its body a byte now and then is cut off at ReadTimeout, not served for ever.
func TestSlowBodyIsCut(t *testing.T) {
	l := DefaultLimits
	l.ReadTimeout = 500 * time.Millisecond
	addr := serve(t, l)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/pre-reboot HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
	start := time.Now()
	done := make(chan bool)
	go func() { done <- closedWithin(conn, 5*time.Second) }()
	for i := 0; i < 40; i++ { // 4 s of trickling, if the server lets it
		if _, err := conn.Write([]byte("x")); err != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !<-done {
		t.Fatalf("a trickling client kept its connection for %s (ReadTimeout %s)", time.Since(start).Round(time.Millisecond), l.ReadTimeout)
	}
}

// A slow client that never finishes its headers is cut at ReadHeaderTimeout; an idle keep-alive
// connection at IdleTimeout.
func TestSlowHeadersAndIdleAreCut(t *testing.T) {
	l := DefaultLimits
	l.ReadHeaderTimeout, l.IdleTimeout = 300*time.Millisecond, 300*time.Millisecond
	addr := serve(t, l)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\n")
	if !closedWithin(conn, 3*time.Second) {
		t.Error("unfinished headers kept the connection open")
	}
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	fmt.Fprintf(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	r := bufio.NewReader(idle)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !closedWithin(idle, 3*time.Second) {
		t.Error("an idle keep-alive connection was kept open")
	}
}

// At most MaxConns connections are served at once: the next waits until one closes.
func TestMaxConns(t *testing.T) {
	l := DefaultLimits
	l.MaxConns = 2
	addr := serve(t, l)
	var hogs []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n") // body never comes
		hogs = append(hogs, c)
	}
	time.Sleep(100 * time.Millisecond)
	client := &http.Client{Timeout: 500 * time.Millisecond}
	if _, err := client.Get("http://" + addr + "/"); err == nil {
		t.Fatal("a third connection was served while two were held (MaxConns 2)")
	}
	hogs[0].Close()
	client.Timeout = 5 * time.Second
	resp, err := client.Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("not served after a slot freed: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(b), "read 0") {
		t.Errorf("reply %q", b)
	}
	hogs[1].Close()
}
