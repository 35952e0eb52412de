package testenv

import "sync"

// Peak tracks which nodes are unavailable right now and the largest number at any one instant, for
// the watchers that prove a budget held (tests, the demo, the e2e timeline).
type Peak struct {
	mu   sync.Mutex
	now  map[string]bool
	peak int
}

// Set records whether node is unavailable now and returns how many are.
func (p *Peak) Set(node string, unavailable bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.now == nil {
		p.now = map[string]bool{}
	}
	p.now[node] = unavailable
	n := 0
	for _, v := range p.now {
		if v {
			n++
		}
	}
	if n > p.peak {
		p.peak = n
	}
	return n
}

// Forget drops a deleted node.
func (p *Peak) Forget(node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.now, node)
}

// Max is the largest number of nodes unavailable at one instant so far.
func (p *Peak) Max() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}
