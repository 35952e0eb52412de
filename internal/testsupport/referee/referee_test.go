package referee

import (
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A fake clock: every violation is stamped t=0 unless a test moves it.
func newChecker(limit int) *Checker {
	t0 := time.Unix(1000, 0)
	return NewAt(limit, func() time.Time { return t0 })
}

// node builds a Node at resourceVersion rv. kv are annotation key/value pairs; "unschedulable" and
// "notready" as a key (no value needed, pass "") set the spec/condition instead.
func node(name string, rv int, boot string, kv ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: strconv.Itoa(rv), Annotations: map[string]string{}}}
	n.Status.NodeInfo.BootID = boot
	readyStatus := corev1.ConditionTrue
	for i := 0; i+1 < len(kv); i += 2 {
		switch kv[i] {
		case "unschedulable":
			n.Spec.Unschedulable = true
		case "notready":
			readyStatus = corev1.ConditionFalse
		default:
			n.Annotations[kv[i]] = kv[i+1]
		}
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: readyStatus}}
	return n
}

// In the cycle: cordoned by Slipway and granted.
var granted = []string{"unschedulable", "", KeyCordoned, "true", KeyRebootOK, "true"}
var cordoned = []string{"unschedulable", "", KeyCordoned, "true", KeyRebootOK, "false"}
var idle = []string{KeyRebootOK, "false"}

func kinds(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Kind+":"+v.Node)
	}
	return out
}

func wantKinds(t *testing.T, c *Checker, want ...string) {
	t.Helper()
	got := kinds(c.Violations())
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("violations %q, want %q; all: %v", got, want, c.Violations())
	}
}

func TestUnavailableReasons(t *testing.T) {
	for _, tc := range []struct {
		n    *corev1.Node
		want []string
	}{
		{node("a", 1, "b0", idle...), nil},
		{node("a", 1, "b0", KeyRebootOK, "true"), []string{"reboot-ok"}},
		{node("a", 1, "b0", KeyCordoned, "true"), []string{"cordoned-mark"}},
		{node("a", 1, "b0", "unschedulable", ""), []string{"unschedulable"}},
		{node("a", 1, "b0", "notready", ""), []string{"not-ready"}},
		{node("a", 1, "b0", KeyRebootInProgress, "true"), []string{"reboot-in-progress"}},
		// Anything but "true" is not true: reboot-needed alone is waiting, not unavailable.
		{node("a", 1, "b0", KeyRebootOK, "True", KeyRebootNeeded, "true", KeyRebootInProgress, "false"), nil},
		{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}, []string{"not-ready"}}, // no Ready condition yet
	} {
		if got := Unavailable(tc.n); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v %v: got %v, want %v", tc.n.Annotations, tc.n.Spec.Unschedulable, got, tc.want)
		}
	}
}

// Budget 2: a third node cordoned while two are in their cycle is one violation; staying above adds
// none; a new high adds one; going back under and over again is a new episode.
func TestBudgetExceeded(t *testing.T) {
	c := newChecker(2)
	c.ReplaceNodes([]corev1.Node{*node("a", 1, "a0", idle...), *node("b", 1, "b0", idle...), *node("c", 1, "c0", idle...), *node("d", 1, "d0", idle...)})
	c.ObserveNode(node("a", 2, "a0", granted...))
	c.ObserveNode(node("b", 3, "b0", cordoned...))
	wantKinds(t, c)
	c.ObserveNode(node("c", 4, "c0", KeyRebootInProgress, "true")) // 3 > 2
	wantKinds(t, c, "budget:")
	if v := c.Violations()[0].Msg; !strings.Contains(v, "3 nodes unavailable at once, budget 2") || !strings.Contains(v, "c(reboot-in-progress)") {
		t.Errorf("evidence missing: %s", v)
	}
	c.ObserveNode(node("c", 5, "c0", KeyRebootInProgress, "true", "notready", "")) // still 3: same episode
	wantKinds(t, c, "budget:")
	c.ObserveNode(node("d", 6, "d0", "notready", "")) // 4: a new high
	wantKinds(t, c, "budget:", "budget:")
	c.ObserveNode(node("d", 7, "d0", idle...))
	c.ObserveNode(node("c", 8, "c0", idle...)) // back to 2
	c.ObserveNode(node("c", 9, "c0", cordoned...))
	wantKinds(t, c, "budget:", "budget:", "budget:")
	if st := c.Stats(); st.Peak != 4 || st.Unavailable != 3 {
		t.Errorf("stats %+v, want peak 4, unavailable 3", st)
	}
}

// Budget 1, one node hands over to the next. In watch order (finish, then the next start) that is
// never two at once; a relist that shows the handover already done must not be read node by node.
func TestBudgetHandoverIsNotAViolation(t *testing.T) {
	c := newChecker(1)
	c.ReplaceNodes([]corev1.Node{*node("a", 1, "a0", granted...), *node("b", 1, "b0", idle...)})
	c.ObserveNode(node("a", 2, "a1", granted...)) // came back
	c.ObserveNode(node("a", 3, "a1", idle...))    // finished
	c.ObserveNode(node("b", 4, "b0", cordoned...))
	// Relist after a gap: b done, a started again; the other order of the two in the list.
	c.ReplaceNodes([]corev1.Node{*node("a", 9, "a1", cordoned...), *node("b", 9, "b0", idle...)})
	c.ReplaceNodes([]corev1.Node{*node("b", 12, "b0", cordoned...), *node("a", 12, "a1", idle...)})
	wantKinds(t, c)
	if st := c.Stats(); st.Peak != 1 || st.Relists != 2 {
		t.Errorf("stats %+v, want peak 1 and 2 relists", st)
	}
}

// The never-returning node counts for ever: with budget 3 only two others may be in their cycle.
func TestNeverReturningNodeKeepsItsSlot(t *testing.T) {
	c := newChecker(3)
	c.ReplaceNodes([]corev1.Node{*node("x", 1, "x0", idle...), *node("a", 1, "a0", idle...), *node("b", 1, "b0", idle...), *node("c", 1, "c0", idle...)})
	c.ObserveNode(node("x", 2, "x0", append(granted, KeyRebootInProgress, "true", KeyStalled, "RebootTimeout")...))
	c.ObserveNode(node("a", 3, "a0", cordoned...))
	c.ObserveNode(node("b", 4, "b0", cordoned...))
	wantKinds(t, c)
	c.ObserveNode(node("c", 5, "c0", cordoned...))
	wantKinds(t, c, "budget:")
}

func TestRebootNeedsAGrant(t *testing.T) {
	c := newChecker(5)
	c.ReplaceNodes([]corev1.Node{*node("a", 1, "a0", idle...), *node("b", 1, "b0", idle...), *node("g", 1, "g0", idle...)})
	// a: granted, rebooted once, finished: a cycle, no violation.
	c.ObserveNode(node("a", 2, "a0", cordoned...))
	c.ObserveNode(node("a", 3, "a0", granted...))
	c.ObserveNode(node("a", 4, "a0", append(granted, KeyRebootInProgress, "true")...))
	c.ObserveNode(node("a", 5, "a1", append(granted, KeyRebootInProgress, "true")...))
	c.ObserveNode(node("a", 6, "a1", idle...))
	wantKinds(t, c)
	// b: the boot ID changes while reboot-ok is false.
	c.ObserveNode(node("b", 7, "b1", idle...))
	wantKinds(t, c, "reboot:b")
	// a again: granted once, rebooted twice.
	c.ObserveNode(node("a", 8, "a1", granted...))
	c.ObserveNode(node("a", 9, "a2", granted...))
	c.ObserveNode(node("a", 10, "a3", granted...))
	c.ObserveNode(node("a", 11, "a3", idle...))
	wantKinds(t, c, "reboot:b", "reboot:a")
	// g: a grant that ends without a reboot (aborted) is no cycle.
	c.ObserveNode(node("g", 12, "g0", granted...))
	c.ObserveNode(node("g", 13, "g0", idle...))
	if got := c.Stats().Cycles; got != 2 {
		t.Errorf("cycles %d, want 2 (a twice; g aborted, b not granted)", got)
	}
}

// A reboot that happened while the watch was down shows up in a relist with reboot-ok already false:
// the checker cannot tell whether it was granted, so it does not judge (and still counts the cycle
// if it saw the grant).
func TestRebootAcrossARelistIsNotJudged(t *testing.T) {
	c := newChecker(5)
	c.ReplaceNodes([]corev1.Node{*node("a", 1, "a0", idle...)})
	c.ObserveNode(node("a", 2, "a0", granted...))
	c.ReplaceNodes([]corev1.Node{*node("a", 7, "a1", idle...)})
	wantKinds(t, c)
	if got := c.Stats().Cycles; got != 1 {
		t.Errorf("cycles %d, want 1", got)
	}
	// A whole cycle inside a gap (never seen granted): counted, not judged.
	c.ReplaceNodes([]corev1.Node{*node("a", 12, "a2", idle...)})
	wantKinds(t, c)
	if got := c.Stats().Cycles; got != 2 {
		t.Errorf("cycles %d, want 2", got)
	}
	// The same change seen through the watch is a reboot without a grant.
	c.ObserveNode(node("a", 13, "a3", idle...))
	wantKinds(t, c, "reboot:a")
}

func pod(name, nodeName string, rv int, ready bool, deleting bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: strconv.Itoa(rv), Labels: map[string]string{"app": "guarded"}},
		Spec: corev1.PodSpec{NodeName: nodeName}}
	if ready {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	if deleting {
		now := metav1.Now()
		p.DeletionTimestamp = &now
	}
	return p
}

func pdb(min int) *policyv1.PodDisruptionBudget {
	m := intstr.FromInt32(int32(min))
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "guarded"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &m, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}}}
}

// Grants are judged against the pods once the pod watch has passed the grant's resourceVersion.
func TestGrantWithPodsLeftIsFlagged(t *testing.T) {
	c := newChecker(5)
	c.ReplacePods(nil, "1")
	c.ReplaceNodes([]corev1.Node{*node("a", 1, "a0", idle...), *node("b", 1, "b0", idle...), *node("s", 1, "s0", idle...)})
	c.ObservePod(pod("on-a", "a", 2, true, false))
	c.ObservePod(pod("on-b", "b", 3, true, false))
	// a: cordoned, its pod evicted and gone, then granted: fine.
	c.ObserveNode(node("a", 4, "a0", cordoned...))
	c.ObservePod(pod("on-a", "a", 5, true, true))
	c.DeletePod(pod("on-a", "a", 6, true, true))
	c.ObserveNode(node("a", 7, "a0", granted...))
	// b: cordoned, a pod arriving after the cordon (a scheduling race no drain sees) is not held
	// against it, but the one that was there before is.
	c.ObserveNode(node("b", 8, "b0", cordoned...))
	c.ObservePod(pod("late-b", "b", 9, true, false))
	c.ObserveNode(node("b", 10, "b0", granted...))
	c.PodBookmark("9")
	wantKinds(t, c) // the pod watch has not reached rv 10 yet
	c.PodBookmark("10")
	wantKinds(t, c, "drain:b")
	if v := c.Violations()[0].Msg; !strings.Contains(v, "ns/on-b") || strings.Contains(v, "late-b") {
		t.Errorf("wrong evidence: %s", v)
	}
	// s: granted without ever being cordoned.
	c.ObserveNode(node("s", 11, "s0", KeyRebootOK, "true"))
	wantKinds(t, c, "drain:b", "drain:s")
}

func TestPDBFloor(t *testing.T) {
	c := newChecker(5)
	c.ReplacePDBs([]policyv1.PodDisruptionBudget{*pdb(2)})
	c.ReplacePods(nil, "1")
	// Not armed while the workload comes up.
	c.ObservePod(pod("p1", "a", 2, false, false))
	c.ObservePod(pod("p1", "a", 3, true, false))
	wantKinds(t, c)
	c.ObservePod(pod("p2", "b", 4, true, false)) // 2 healthy: armed
	c.ObservePod(pod("p3", "c", 5, true, false))
	c.ObservePod(pod("p1", "a", 6, true, true)) // evicted: 2 left, fine
	c.DeletePod(pod("p1", "a", 7, true, true))
	wantKinds(t, c)
	c.ObservePod(pod("p2", "b", 8, true, true)) // 1 left: below minAvailable
	wantKinds(t, c, "pdb:")
	c.DeletePod(pod("p2", "b", 9, true, true)) // same episode
	wantKinds(t, c, "pdb:")
	if v := c.Violations()[0].Msg; !strings.Contains(v, "1 healthy pods, minAvailable 2 (left: p3)") {
		t.Errorf("evidence: %s", v)
	}
}

func TestUpdatesAndEndState(t *testing.T) {
	c := newChecker(5)
	c.ReplaceNodes([]corev1.Node{*node("a", 1, "a0", idle...), *node("b", 1, "b0", idle...), *node("x", 1, "x0", idle...),
		*node("y", 1, "y0", idle...), *node("z", 1, "z0", idle...)})
	c.Staged("a")
	c.Rebooted("a", 1)
	c.Rebooted("a", 2) // one update, two reboots
	wantKinds(t, c, "update:a")
	c.Staged("a")
	c.Staged("a") // a: 3 staged, 2 rebooted at the end
	c.Staged("b")
	c.Rebooted("b", 1) // b: fine
	c.NeverBack("x")   // x: the last of 2 never came back: fine; stalled
	c.Staged("x")
	c.Rebooted("x", 1)
	c.Staged("x")
	c.ObserveNode(node("x", 2, "x1", append(granted, KeyRebootInProgress, "true", KeyStalled, "RebootTimeout")...))
	c.ObserveNode(node("y", 3, "y0", cordoned...))                // y: left cordoned
	c.ObserveNode(node("z", 4, "z0", KeyStalled, "DrainTimeout")) // z: stalled mark left behind
	if ok, why := c.Settled(true); ok || !strings.Contains(why, "a: 2 of 3") {
		t.Errorf("settled %v (%s), want not settled because of a", ok, why)
	}
	c.Final(true)
	wantKinds(t, c, "update:a", "update:a", "end-state:y", "end-state:z")

	// Without the stalled mark the never-returning node is a violation when the operator can mark it.
	c2 := newChecker(5)
	c2.ReplaceNodes([]corev1.Node{*node("x", 1, "x0", granted...)})
	c2.NeverBack("x")
	c2.Staged("x")
	c2.Final(true)
	wantKinds(t, c2, "end-state:x")
	c3 := newChecker(5)
	c3.ReplaceNodes([]corev1.Node{*node("x", 1, "x0", granted...)})
	c3.NeverBack("x")
	c3.Staged("x")
	c3.Final(false)
	wantKinds(t, c3)
}

// The checker must stay independent of what it judges: no Slipway package anywhere in its dependency
// graph (go list -deps: direct and indirect imports, test files excluded). The same query on a package
// that does use Slipway's code must find it, or the check could never fail.
func TestImportsNothingOfSlipway(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	const self = "github.com/slipway-dev/slipway/internal/testsupport/referee"
	slipway := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		var found []string
		for _, p := range strings.Fields(string(out)) {
			if p != pkg && (p == "github.com/slipway-dev/slipway" || strings.HasPrefix(p, "github.com/slipway-dev/slipway/")) {
				found = append(found, p)
			}
		}
		return found
	}
	if got := slipway("github.com/slipway-dev/slipway/internal/testsupport/simnode"); len(got) == 0 {
		t.Fatal("go list -deps finds no Slipway package under agent/simnode: the check below would prove nothing")
	}
	if got := slipway(self); len(got) > 0 {
		t.Errorf("the referee depends on Slipway packages %v: it must judge with its own code", got)
	}
}

// withUID gives a Node its object identity (node() leaves it empty, as older tests need nothing more).
func withUID(n *corev1.Node, uid string) *corev1.Node { n.UID = types.UID(uid); return n }

// A Node deleted and registered again under its name is a new object: its old grant's one reboot is
// no violation on the new object, a second reboot is; a grant on the new object starts clean; the same
// machine rebooting twice for one version as one Node object is a violation, once per object is not.
func TestNodeReregisteredUnderItsName(t *testing.T) {
	v := []string{KeyNewVersion, "4500.1.0"}
	c := newChecker(5)
	c.ReplaceNodes([]corev1.Node{*withUID(node("a", 1, "a0", idle...), "u1")})
	c.ObserveNode(withUID(node("a", 2, "a0", append(cordoned, v...)...), "u1"))
	c.ObserveNode(withUID(node("a", 3, "a0", append(granted, v...)...), "u1"))
	// Deleted while granted, registered again before the machine went down; then it reboots.
	c.DeleteNode("a")
	c.ObserveNode(withUID(node("a", 5, "a0", idle...), "u2"))
	c.ObserveNode(withUID(node("a", 6, "a1", idle...), "u2"))
	wantKinds(t, c)
	if got := c.Stats().Cycles; got != 1 {
		t.Errorf("cycles %d, want 1 (the grant of the deleted object ended in its reboot)", got)
	}
	// A second ungranted reboot of the new object is one.
	c.ObserveNode(withUID(node("a", 7, "a2", idle...), "u2"))
	wantKinds(t, c, "reboot:a")

	// The same through a relist that shows another UID (the deletion was never seen): the grant of
	// the old object carries, once.
	c = newChecker(5)
	c.ReplaceNodes([]corev1.Node{*withUID(node("b", 1, "b0", append(granted, v...)...), "u1")})
	c.ReplaceNodes([]corev1.Node{*withUID(node("b", 4, "b0", idle...), "u2")})
	c.ObserveNode(withUID(node("b", 5, "b1", idle...), "u2"))
	wantKinds(t, c)
	// A carried grant whose reboot happened unseen excuses nothing later.
	c = newChecker(5)
	c.ReplaceNodes([]corev1.Node{*withUID(node("d", 1, "d0", append(granted, v...)...), "u1")})
	c.DeleteNode("d")
	c.ObserveNode(withUID(node("d", 3, "d1", idle...), "u2"))
	if got := c.Stats().Cycles; got != 1 {
		t.Errorf("cycles %d, want 1 (the machine came back from the carried grant's reboot)", got)
	}
	c.ObserveNode(withUID(node("d", 4, "d2", idle...), "u2"))
	wantKinds(t, c, "reboot:d")

	// Deleted after the machine came back from its grant's reboot, before the grant ended: a cycle, and
	// nothing carried (a later ungranted reboot is one).
	c = newChecker(5)
	c.ReplaceNodes([]corev1.Node{*withUID(node("h", 1, "h0", idle...), "u1")})
	c.ObserveNode(withUID(node("h", 2, "h0", append(cordoned, v...)...), "u1"))
	c.ObserveNode(withUID(node("h", 3, "h0", append(granted, v...)...), "u1"))
	c.ObserveNode(withUID(node("h", 4, "h1", append(granted, v...)...), "u1"))
	c.DeleteNode("h")
	c.ObserveNode(withUID(node("h", 6, "h1", idle...), "u2"))
	if got := c.Stats().Cycles; got != 1 {
		t.Errorf("cycles %d, want 1 (rebooted under its grant before the Node went)", got)
	}
	c.ObserveNode(withUID(node("h", 7, "h2", idle...), "u2"))
	wantKinds(t, c, "reboot:h")

	// One reboot per (UID, version): granted for 4500.1.0 twice as the same object is a violation
	// (the machine staged the same release again: the update did not take, or it was asked twice).
	c = newChecker(5)
	c.ReplaceNodes([]corev1.Node{*withUID(node("e", 1, "e0", idle...), "u1")})
	// cycle shows one granted reboot of name from boot from to boot to, each Node passed through as.
	cycle := func(name string, rv int, from, to string, as func(*corev1.Node) *corev1.Node) {
		c.ObserveNode(as(node(name, rv, from, append(cordoned, v...)...)))
		c.ObserveNode(as(node(name, rv+1, from, append(granted, v...)...)))
		c.ObserveNode(as(node(name, rv+2, to, append(granted, v...)...)))
		c.ObserveNode(as(node(name, rv+3, to, idle...)))
	}
	uid := func(u string) func(*corev1.Node) *corev1.Node {
		return func(n *corev1.Node) *corev1.Node { return withUID(n, u) }
	}
	cycle("e", 2, "e0", "e1", uid("u1"))
	wantKinds(t, c)
	cycle("e", 6, "e1", "e2", uid("u1"))
	wantKinds(t, c, "reboot:e")
	// As a new object the same version may take its one reboot.
	c.DeleteNode("e")
	c.ObserveNode(withUID(node("e", 11, "e2", idle...), "u3"))
	cycle("e", 12, "e2", "e3", uid("u3"))
	wantKinds(t, c, "reboot:e")
	// A grant for the version the node already runs (a simulation staging it again) is not judged.
	c = newChecker(5)
	run := func(n *corev1.Node) *corev1.Node {
		n.Labels = map[string]string{KeyVersion: "4500.1.0"}
		return withUID(n, "u1")
	}
	c.ReplaceNodes([]corev1.Node{*run(node("f", 1, "f0", idle...))})
	cycle("f", 10, "f0", "f1", run)
	cycle("f", 20, "f1", "f2", run)
	wantKinds(t, c)
}

// A pool's budget (RebootPolicy) is judged by the pool label, once judging started: two of pool a at
// once break its budget of 1 though the fleet's 3 holds; a node without the label is in no pool.
func TestPoolBudget(t *testing.T) {
	c := newChecker(3)
	c.Pools("pool", map[string]int{"a": 1})
	inPool := func(n *corev1.Node, pool string) *corev1.Node {
		n.Labels = map[string]string{"pool": pool}
		return n
	}
	c.ReplaceNodes([]corev1.Node{*inPool(node("a1", 1, "a0", idle...), "a"), *inPool(node("a2", 1, "b0", idle...), "a"), *node("x", 1, "x0", idle...)})
	c.ObserveNode(inPool(node("a1", 2, "a0", cordoned...), "a"))
	c.ObserveNode(inPool(node("a2", 3, "b0", cordoned...), "a")) // not judged yet (the release before pools)
	wantKinds(t, c)
	c.JudgePools() // judged once every pool is within its budget: not yet
	wantKinds(t, c)
	c.ObserveNode(inPool(node("a2", 4, "b0", idle...), "a"))
	c.ObserveNode(node("x", 5, "x0", cordoned...)) // no pool: the fleet's budget only
	wantKinds(t, c)
	c.ObserveNode(inPool(node("a2", 6, "b0", cordoned...), "a"))
	wantKinds(t, c, "pool-budget:")
	if v := c.Violations()[0].Msg; !strings.Contains(v, "2 nodes of pool a unavailable at once, its budget 1") {
		t.Errorf("evidence: %s", v)
	}
	if p := c.PoolPeaks()["a"]; p != 2 {
		t.Errorf("pool a's peak %d, want 2", p)
	}
}
