package testenv

import (
	"fmt"
	"net"
	"sync"
)

// Proxy is a TCP proxy between one client (an operator process) and the API server that a test can
// cut and heal, as a network partition does: while cut, nothing passes in either direction and new
// connections hang, yet nothing is closed; what the client sent meanwhile (into its socket, before it
// gave up or even exited) is delivered when the cut heals, as TCP retransmits it. That is the hostile
// case for a leader: a write it sent before its lease ran out lands after a successor took over.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cond  *sync.Cond
	cut   bool
	conns map[net.Conn]struct{}
	done  bool
	held  int // chunks and connections held by a cut so far
}

// StartProxy listens on a free loopback port and forwards every connection to target (host:port).
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	go p.serve()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut stops every byte in both directions until Heal.
func (p *Proxy) Cut() { p.mu.Lock(); p.cut = true; p.mu.Unlock() }

// Heal lets everything held pass, in order.
func (p *Proxy) Heal() { p.mu.Lock(); p.cut = false; p.cond.Broadcast(); p.mu.Unlock() }

// Close ends the proxy and every connection through it.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.done, p.cut = true, false
	for c := range p.conns {
		c.Close()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	p.ln.Close()
}

// pass blocks while the proxy is cut; false once it is closed.
func (p *Proxy) pass() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut && !p.done {
		p.held++
	}
	for p.cut && !p.done {
		p.cond.Wait()
	}
	return !p.done
}

// Held is how many chunks and new connections a cut has held so far (what a test waits for before it
// says nothing passed).
func (p *Proxy) Held() int { p.mu.Lock(); defer p.mu.Unlock(); return p.held }

func (p *Proxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *Proxy) forward(client net.Conn) {
	p.track(client, true)
	defer p.track(client, false)
	defer client.Close()
	if !p.pass() {
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return // the API server is down: the client sees its connection close, as with no proxy
	}
	p.track(up, true)
	defer p.track(up, false)
	defer up.Close()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.copy(up, client) }()
	go func() { defer wg.Done(); p.copy(client, up) }()
	wg.Wait()
}

// copy moves bytes from src to dst, holding each chunk while the proxy is cut; at src's end it
// half-closes dst (a request sent before the client went away still arrives whole).
func (p *Proxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
	}
}
