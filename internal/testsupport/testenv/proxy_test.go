package testenv

import (
	"io"
	"net"
	"testing"
	"time"
)

// A cut holds what the client sends, even after the client closed its end; the heal delivers it, in
// order and whole: the late write of a partitioned leader.
func TestProxyCutHoldsAndHealDelivers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c)
				got <- string(b)
			}()
		}
	}()
	p, err := StartProxy(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	// Through the healthy proxy.
	send := func(msg string) {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	send("before")
	select {
	case s := <-got:
		if s != "before" {
			t.Fatalf("got %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing arrived through the healthy proxy")
	}

	// Cut: a client writes and goes away; nothing arrives until the heal.
	p.Cut()
	send("stale PATCH")
	send("second")
	// Wait until the proxy holds both connections (each is held before it is even dialled on).
	for deadline := time.Now().Add(10 * time.Second); p.Held() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the cut proxy held %d connections, want 2", p.Held())
		}
	}
	select {
	case s := <-got:
		t.Fatalf("%q passed a cut proxy", s)
	default:
	}
	p.Heal()
	want := map[string]bool{"stale PATCH": true, "second": true}
	for len(want) > 0 {
		select {
		case s := <-got:
			if !want[s] {
				t.Fatalf("after the heal got %q, want one of %v", s, want)
			}
			delete(want, s)
		case <-time.After(10 * time.Second):
			t.Fatalf("after the heal never arrived: %v", want)
		}
	}
}
