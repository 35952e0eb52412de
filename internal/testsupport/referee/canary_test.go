package referee

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// versioned is node() with the version label and a staged new-version.
func versioned(name string, rv int, running, staged string, kv ...string) *corev1.Node {
	n := node(name, rv, "b-"+name, append(kv, KeyNewVersion, staged)...)
	n.Labels = map[string]string{KeyVersion: running}
	return n
}

// The canary invariant at known instants: one canary of B may go; a second node in a cycle for B
// before the first finished is a violation, and so is one inside the bake; after the bake it is not.
// A version some node already ran is not judged, nor a machine the scenario lost.
func TestCanaryInvariant(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	setup := func() *Checker {
		c := NewAt(10, clock)
		c.Canaries(1, 10*time.Second)
		c.ReplaceNodes([]corev1.Node{*versioned("a", 1, "A", "0.0.0"), *versioned("b", 1, "A", "0.0.0"), *versioned("c", 1, "A", "0.0.0"), *versioned("z", 1, "Z", "0.0.0")})
		return c
	}

	c := setup()
	c.ObserveNode(versioned("a", 2, "A", "B", cordoned...)) // the canary
	c.ObserveNode(versioned("b", 3, "A", "B", cordoned...)) // a second before it finished
	wantKinds(t, c, Canary+":")

	c = setup()
	c.ObserveNode(versioned("a", 2, "A", "B", cordoned...))
	c.ObserveNode(versioned("a", 3, "B", "0.0.0", idle...)) // finished on B
	now = now.Add(5 * time.Second)
	c.ObserveNode(versioned("b", 4, "A", "B", cordoned...)) // inside the 10 s bake
	wantKinds(t, c, Canary+":")

	c = setup()
	c.ObserveNode(versioned("a", 2, "A", "B", cordoned...))
	c.ObserveNode(versioned("a", 3, "B", "0.0.0", idle...))
	now = now.Add(9 * time.Second) // within the slack of the operator's whole seconds
	c.ObserveNode(versioned("b", 4, "A", "B", cordoned...))
	c.ObserveNode(versioned("c", 5, "A", "B", cordoned...))
	wantKinds(t, c)

	// Back on the old version: no finish on B, so the next is still a second canary.
	c = setup()
	c.ObserveNode(versioned("a", 2, "A", "B", cordoned...))
	c.ObserveNode(versioned("a", 3, "A", "0.0.0", idle...))
	now = now.Add(time.Minute)
	c.ObserveNode(versioned("b", 4, "A", "B", cordoned...))
	c.ObserveNode(versioned("c", 5, "A", "B", cordoned...))
	wantKinds(t, c, Canary+":")

	// A cycle's start in a watch gap, its node back from the reboot and already asking for C while the
	// operator has not finished its cycle for B (a leader gap): the relist shows it busy, and the cycle
	// is for B, the version its reboot was granted for, not a second canary of C.
	c = setup()
	c.ObserveNode(versioned("a", 2, "A", "C", cordoned...)) // the canary of C
	b := versioned("b", 3, "B", "C", granted...)            // back from its reboot, the grant not yet ended
	b.Annotations[KeyRebootVersion] = "B"
	c.ReplaceNodes([]corev1.Node{*versioned("a", 2, "A", "C", cordoned...), *b, *versioned("c", 1, "A", "0.0.0"), *versioned("z", 1, "Z", "0.0.0")})
	wantKinds(t, c)

	// A whole cycle in a watch gap: the relist shows the canary already on B. It finished at an
	// unknown moment, so the next node's cycle for B is not judged a second canary.
	c = setup()
	c.ReplaceNodes([]corev1.Node{*versioned("a", 3, "B", "0.0.0", idle...), *versioned("b", 3, "A", "0.0.0"), *versioned("c", 3, "A", "0.0.0"), *versioned("z", 3, "Z", "0.0.0")})
	c.ObserveNode(versioned("b", 4, "A", "B", cordoned...))
	c.ObserveNode(versioned("c", 5, "A", "B", cordoned...))
	wantKinds(t, c)

	// Z was running when the checker started: nothing to prove. A lost machine is not counted.
	c = setup()
	c.ObserveNode(versioned("a", 2, "A", "Z", cordoned...))
	c.ObserveNode(versioned("b", 3, "A", "Z", cordoned...))
	c.NeverBack("c")
	c.ObserveNode(versioned("c", 4, "A", "B", cordoned...))
	c.ObserveNode(versioned("a", 5, "A", "0.0.0", idle...))
	c.ObserveNode(versioned("a", 6, "A", "B", cordoned...))
	wantKinds(t, c)
}

// A halted version (its failed Node deleted, no resume yet): a node starting a cycle for it is a
// violation; after Resumed it is not; a cycle for another version never is.
func TestHaltInvariant(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	setup := func() *Checker {
		c := NewAt(10, clock)
		c.Canaries(1, time.Second)
		c.ReplaceNodes([]corev1.Node{*versioned("a", 1, "A", "0.0.0"), *versioned("b", 1, "A", "0.0.0"), *versioned("c", 1, "A", "0.0.0")})
		c.NeverBack("c")
		c.ObserveNode(versioned("c", 2, "A", "B", cordoned...)) // the canary of B, lost
		c.Halted("B")
		c.DeleteNode("c")
		return c
	}
	c := setup()
	c.ObserveNode(versioned("a", 3, "A", "B", cordoned...))
	wantKinds(t, c, Halt+":a")

	c = setup()
	c.ObserveNode(versioned("a", 3, "A", "C", cordoned...)) // another version goes on
	c.Resumed("B")
	c.ObserveNode(versioned("b", 4, "A", "B", cordoned...))
	wantKinds(t, c)
}
