package nodes

import (
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Overlay remembers the Node objects a writer got back from its own PATCHes until its informer has
// caught up, so the next decision is not made on a cache that predates the last write (the
// "expectations" idea of the ReplicaSet controller). It only ever makes a view newer, never older, and
// it is lost on restart on purpose: a fresh informer LIST already contains every earlier write.
type Overlay struct {
	mu sync.Mutex
	m  map[string]*corev1.Node
}

// NewOverlay returns an empty overlay.
func NewOverlay() *Overlay { return &Overlay{m: map[string]*corev1.Node{}} }

// Wrote records the object a write returned.
func (o *Overlay) Wrote(n *corev1.Node) {
	if n == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if cur, ok := o.m[n.Name]; ok && newer(cur.ResourceVersion, n.ResourceVersion) {
		return
	}
	o.m[n.Name] = n
}

// Observed is called with every object the informer delivers; once it has reached the written
// version, the overlay entry is dropped.
func (o *Overlay) Observed(n *corev1.Node) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if cur, ok := o.m[n.Name]; ok && !newer(cur.ResourceVersion, n.ResourceVersion) {
		delete(o.m, n.Name)
	}
}

// Deleted forgets a node.
func (o *Overlay) Deleted(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, name)
}

// View returns the newer of the cached object and the written one.
func (o *Overlay) View(cached *corev1.Node) *corev1.Node {
	if cached == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if w, ok := o.m[cached.Name]; ok && w.UID == cached.UID && newer(w.ResourceVersion, cached.ResourceVersion) {
		return w // a write to another machine under this name (deleted, created again) is never its view
	}
	return cached
}

// newer reports whether resource version a is strictly newer than b. Resource versions are opaque by
// contract, but every apiserver backed by etcd serves them as increasing integers; when either is not
// one, we cannot tell and answer false, which drops the overlay and falls back to the cache.
func newer(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	return x > y
}
