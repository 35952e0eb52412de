package onchange

import "testing"

func TestAnyCallsOnEveryKind(t *testing.T) {
	n := 0
	h := Any(func() { n++ })
	h.OnAdd(nil, false)
	h.OnUpdate(nil, nil)
	h.OnDelete(nil)
	if n != 3 {
		t.Fatalf("called %d times for an add, an update and a delete, want 3", n)
	}
}
