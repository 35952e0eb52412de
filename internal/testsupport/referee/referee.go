// Package referee is the independent judge of Slipway's budget and cycle: an invariant checker that
// shares no code with what it judges. The chaos run, the fleet benchmark and the operator's
// integration tests (their budget watchers) use it. It imports no Slipway package at all (not
// internal/protocol, not the operator, not the agent: TestImportsNothingOfSlipway checks the whole
// dependency graph); it re-declares the few annotation keys it reads and keeps its own picture of the
// cluster from its own list+watch of Nodes, Pods and PodDisruptionBudgets (watch.go). What it cannot see from the API (how often a simulated
// machine really rebooted, and how many updates were staged on it) the scenario tells it through
// Staged and Rebooted.
//
// The checker is a plain state machine fed in the order the API server delivered the changes, so its
// unit tests drive it with synthetic Nodes and assert exactly which violations it reports.
//
// Soundness across gaps: each watch delivers one object type in resourceVersion order, so after every
// event the checker's Nodes are a consistent snapshot of the cluster at that resourceVersion, and a
// budget violation it reports really happened. A (re)list replaces the whole picture at once (never
// node by node, which would mix two moments) and breaks continuity: judgements that need two
// consecutive states of a node (a boot ID change while reboot-ok was not true, two reboots for one
// grant) are not made across a relist, and Relists says how often that happened.
package referee

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// The keys the checker reads, re-declared here on purpose (FLUO's wire protocol and Slipway's two
// operator marks): a typo in the product's constants must not be able to hide from its referee.
const (
	KeyRebootOK         = "flatcar-linux-update.v1.flatcar-linux.net/reboot-ok"
	KeyRebootNeeded     = "flatcar-linux-update.v1.flatcar-linux.net/reboot-needed"
	KeyRebootInProgress = "flatcar-linux-update.v1.flatcar-linux.net/reboot-in-progress"
	KeyCordoned         = "update.slipway.dev/cordoned"
	KeyStalled          = "update.slipway.dev/stalled"
)

// Kinds of violation.
const (
	Budget = "budget" // more nodes unavailable at one instant than the budget allows
	// PoolBudget: more nodes of one pool (RebootPolicy) unavailable at one instant than its budget.
	PoolBudget = "pool-budget"
	PDB        = "pdb"       // a PDB-protected workload dropped below its minAvailable
	Drain      = "drain"     // reboot-ok granted on a schedulable node, or with pods still on it
	Reboot     = "reboot"    // a reboot without reboot-ok, or two reboots for one grant
	Update     = "update"    // reboots do not match the updates staged (one reboot per update)
	EndState   = "end-state" // what the cluster looks like once everything settled
)

// Violation is one broken invariant, with the evidence.
type Violation struct {
	At   time.Duration // since the checker started
	Kind string
	Node string // "" when not about one node
	Msg  string
}

func (v Violation) String() string {
	node := ""
	if v.Node != "" {
		node = " " + v.Node
	}
	return fmt.Sprintf("violation t=%.1fs %s%s: %s", v.At.Seconds(), v.Kind, node, v.Msg)
}

// Checker holds the picture and the violations found so far. All methods are safe for concurrent use.
type Checker struct {
	mu    sync.Mutex
	limit int
	start time.Time
	now   func() time.Time

	nodes map[string]*nodeState
	pods  map[string]*podState // namespace/name
	pdbs  map[string]*pdbState // namespace/name

	violations []Violation
	cycles     int
	peak       int
	over       bool // currently above the budget (one violation per episode and new high)
	overHigh   int
	relists    map[string]int
	// podRV: every Pod change up to this resourceVersion has been seen (events and bookmarks).
	podRV   uint64
	grants  []grantCheck
	rvsSane bool
	canary  *canaryCheck    // nil: the canary invariant is off (Canaries)
	halted  map[string]bool // versions held until a person resumes them (Halted; judged with the canaries)
	// pools: RebootPolicy budgets by the value of the node label poolKey (Pools); judged once poolsOn.
	poolKey    string
	pools      map[string]int
	poolsOn    bool
	poolsArmed bool           // every pool was within its budget once since JudgePools: judged from then on
	poolOver   map[string]int // the high of each pool's current episode above its budget
	poolPeaks  map[string]int
	// denied: the versions each "<policy>/<generation>" denied (DenyVersions); versionGrants: the grants
	// under a pin, judged against them in Final.
	denied        map[string][]string
	versionGrants []versionGrant
}

type nodeState struct {
	last       *corev1.Node
	continuous bool // last came from the watch after an earlier observation (no relist in between)
	// The current grant as seen: since when reboot-ok has been true, at which boot ID.
	granted     bool
	grantBoot   string
	grantRV     uint64
	bootChanges int
	// The current cordon: the resourceVersion it was first seen at; cordonKnown is false when the
	// cordon was first seen in a relist (its real moment is unknown).
	cordonRV    uint64
	cordonKnown bool
	// stalledWhenDeleted: its Node was deleted while it carried the stalled mark.
	stalledWhenDeleted bool
	// uid is the Node object the state follows. A Node deleted and registered again under the same
	// name is a new object: its grant, cordon and cycle start clean (gone).
	uid types.UID
	// carried: the Node was deleted while granted at boot carriedBoot. The machine may still take
	// that grant's one reboot after its kubelet registered the Node again (a grant is to the machine
	// that was drained; the new object never saw it).
	carried     bool
	carriedBoot string
	// grantVersion: the new-version the current grant was for; rebootedFor: (Node UID, version)
	// pairs this machine rebooted for under a grant. Each pair reboots once.
	grantVersion string
	rebootedFor  map[string]bool
	// What the scenario says happened to the machine; cycles: completed cycles the checker counted.
	staged, boots, cycles int
	neverBack             bool
	// cycleFor: the OS version the node's current cycle is for, as the canary check saw it.
	cycleFor string
}

type podState struct {
	namespace, name, node string
	labels                labels.Set
	ready, deleting, gone bool
	firstRV               uint64 // an upper bound of its creation
	deleteRV              uint64 // deletion seen at (0: not deleted; unknownRV: at an unknown moment)
}

type pdbState struct {
	namespace, name string
	selector        labels.Selector
	minAvailable    int  // -1: not an integer minAvailable (not checked)
	armed           bool // the workload once reached minAvailable; from then on it must stay there
	below           bool
}

type grantCheck struct {
	node              string
	grantRV, cordonRV uint64
	at                time.Time // when the grant was seen
}

const unknownRV = ^uint64(0)

// New returns a checker for a cluster whose budget allows limit unavailable nodes.
func New(limit int) *Checker {
	return NewAt(limit, time.Now)
}

// NewAt is New with a clock (for tests).
func NewAt(limit int, now func() time.Time) *Checker {
	return &Checker{limit: limit, now: now, start: now(), nodes: map[string]*nodeState{}, pods: map[string]*podState{},
		pdbs: map[string]*pdbState{}, relists: map[string]int{}, rvsSane: true}
}

// Since sets the moment violation times count from (default: when the checker was made).
func (c *Checker) Since(start time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.start = start
}

func (c *Checker) violate(kind, node, format string, args ...interface{}) {
	c.violations = append(c.violations, Violation{At: c.now().Sub(c.start), Kind: kind, Node: node, Msg: fmt.Sprintf(format, args...)})
}

func (c *Checker) rv(s string) uint64 {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		// resourceVersions are opaque in general; the checks comparing them across object types
		// need etcd's revisions. Without them those checks are off (and say so in Notes).
		c.rvsSane = false
		return 0
	}
	return v
}

// ----- Nodes -----

// Unavailable says whether n counts against the budget, and why: reboot-ok=true, Slipway's cordon
// mark, spec.unschedulable, not Ready (a missing Ready condition is not Ready), reboot-in-progress=true.
func Unavailable(n *corev1.Node) []string {
	var why []string
	a := n.Annotations
	if a[KeyRebootOK] == "true" {
		why = append(why, "reboot-ok")
	}
	if a[KeyCordoned] == "true" {
		why = append(why, "cordoned-mark")
	}
	if n.Spec.Unschedulable {
		why = append(why, "unschedulable")
	}
	if !ready(n) {
		why = append(why, "not-ready")
	}
	if a[KeyRebootInProgress] == "true" {
		why = append(why, "reboot-in-progress")
	}
	return why
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (c *Checker) node(name string) *nodeState {
	s := c.nodes[name]
	if s == nil {
		s = &nodeState{}
		c.nodes[name] = s
	}
	return s
}

// ObserveNode takes one Node from the watch (added or modified), in the order the watch delivered it.
func (c *Checker) ObserveNode(n *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observeNode(n, true)
	c.checkBudget()
}

// DeleteNode forgets a deleted Node.
func (c *Checker) DeleteNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.nodes[name]; s != nil {
		c.gone(s)
	}
	c.checkBudget()
}

// gone ends what s followed of its Node object: it was deleted (seen, or missing from a relist, or
// replaced by another object of the same name). Its cycle ended with it: a new object starts clean.
func (c *Checker) gone(s *nodeState) {
	if s.last != nil && s.last.Annotations[KeyStalled] != "" {
		s.stalledWhenDeleted = true
	}
	switch {
	case s.last != nil && s.granted && s.bootChanges > 0:
		// Granted, rebooted and back, deleted before its grant ended: that cycle is done.
		c.cycle(s)
	case s.last != nil && s.granted:
		s.carried, s.carriedBoot = true, s.last.Status.NodeInfo.BootID
	}
	s.last, s.continuous = nil, false
	s.granted, s.bootChanges, s.grantVersion = false, 0, ""
	s.cordonRV, s.cordonKnown = 0, false
	s.cycleFor = ""
}

// ReplaceNodes takes a complete list of Nodes (a first list or a relist after the watch broke): the
// picture becomes the list at once, and continuity is broken for every node.
func (c *Checker) ReplaceNodes(list []corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.relists["nodes"]++
	seen := map[string]bool{}
	for i := range list {
		seen[list[i].Name] = true
		c.observeNode(&list[i], false)
	}
	for name, s := range c.nodes {
		if !seen[name] && s.last != nil {
			c.gone(s)
		}
	}
	c.checkBudget()
}

func (c *Checker) observeNode(n *corev1.Node, fromWatch bool) {
	n = n.DeepCopy()
	s := c.node(n.Name)
	rv := c.rv(n.ResourceVersion)
	if s.last != nil && n.UID != "" && s.last.UID != "" && n.UID != s.last.UID {
		// Deleted and registered again between two observations (a relist, or events the watch
		// coalesced): the old object is gone.
		c.gone(s)
	}
	if s.last == nil && s.carried && n.Status.NodeInfo.BootID != "" && n.Status.NodeInfo.BootID != s.carriedBoot {
		// The carried grant's reboot happened while no Node was there to see: its cycle is done.
		s.carried = false
		c.cycle(s)
	}
	s.uid = n.UID
	prev := s.last
	continuous := fromWatch && prev != nil
	ok := n.Annotations[KeyRebootOK] == "true"
	boot := n.Status.NodeInfo.BootID

	if prev != nil {
		prevBoot := prev.Status.NodeInfo.BootID
		prevOK := prev.Annotations[KeyRebootOK] == "true"
		if boot != prevBoot && prevBoot != "" && boot != "" {
			switch {
			case !continuous:
				// Rebooted while the checker was not looking (a relist): no judgement on the grant.
				// A whole cycle may have passed unseen: granted, rebooted, finished.
				s.bootChanges++
				if !ok && !s.granted {
					c.cycle(s)
				}
			case !ok && s.carried && prevBoot == s.carriedBoot:
				// The reboot of the grant the deleted Node object had (see carried): that cycle is
				// done, the machine is back.
				s.carried = false
				c.cycle(s)
			case !ok:
				c.violate(Reboot, n.Name, "boot ID changed %s -> %s while reboot-ok=%q (a reboot without a grant)", prevBoot, boot, n.Annotations[KeyRebootOK])
			case s.granted && s.bootChanges >= 1:
				c.violate(Reboot, n.Name, "boot ID changed again (%s -> %s) within one grant: two reboots for one reboot-ok", prevBoot, boot)
				s.bootChanges++
			default:
				s.bootChanges++
				c.rebootedFor(s, n)
			}
		}
		if prevOK && !ok && s.granted {
			// A grant ended: a completed cycle if the machine came back in another boot.
			if boot != s.grantBoot || s.bootChanges > 0 {
				c.cycle(s)
			}
			s.granted = false
		}
	}
	if ok && !s.granted {
		s.granted, s.grantBoot, s.grantRV, s.bootChanges = true, boot, rv, 0
		s.grantVersion, s.carried = "", false
		if v := n.Annotations[KeyNewVersion]; v != n.Labels[KeyVersion] {
			s.grantVersion = v // an update to another version (simulations may stage the one running)
		}
		// The version the operator granted the reboot for; new-version only where it wrote none (a node
		// back from its reboot may already have staged the next one).
		granted := n.Annotations[KeyRebootVersion]
		if granted == "" {
			granted = n.Annotations[KeyNewVersion]
		}
		c.noteVersionGrant(n.Name, n.Annotations[KeyAdmittedPolicy], granted)
		if !n.Spec.Unschedulable {
			c.violate(Drain, n.Name, "reboot-ok=true on a schedulable node (granted without cordon and drain)")
		}
		if continuous && (prev == nil || prev.Annotations[KeyRebootOK] != "true") && s.cordonKnown && c.rvsSane {
			c.grants = append(c.grants, grantCheck{node: n.Name, grantRV: rv, cordonRV: s.cordonRV, at: c.now()})
		}
	}
	if !ok && s.granted {
		s.granted = false
	}
	switch {
	case n.Spec.Unschedulable && (prev == nil || !prev.Spec.Unschedulable || !continuous && s.cordonRV == 0):
		s.cordonRV, s.cordonKnown = rv, continuous
	case !n.Spec.Unschedulable:
		s.cordonRV, s.cordonKnown = 0, false
	}
	s.last, s.continuous = n, continuous
	if c.canary != nil {
		c.observeCanary(s, n, prev, fromWatch)
	}
	c.checkGrants()
}

// cycle counts one completed cycle of s's machine.
func (c *Checker) cycle(s *nodeState) { c.cycles++; s.cycles++ }

// CyclesOf is how many completed cycles the checker counted for node's machine (for a scenario that
// compares them with the reboots it made).
func (c *Checker) CyclesOf(node string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.nodes[node]; s != nil {
		return s.cycles
	}
	return 0
}

// rebootedFor records the reboot of s's current grant under its (Node UID, version) and reports a
// second one: a machine reboots once for each version while it is the same Node object.
func (c *Checker) rebootedFor(s *nodeState, n *corev1.Node) {
	v := s.grantVersion
	if v == "" || v == "0.0.0" || n.UID == "" {
		return
	}
	if s.rebootedFor == nil {
		s.rebootedFor = map[string]bool{}
	}
	key := string(n.UID) + " " + v
	if s.rebootedFor[key] {
		c.violate(Reboot, n.Name, "rebooted again for %s as the same Node (UID %s): one reboot per node and version", v, n.UID)
	}
	s.rebootedFor[key] = true
}

// Pools sets RebootPolicy budgets to judge: limits by the value of the node label key (the label the
// policies' selectors read; a node without it is in none). Judged from JudgePools on: an operator that
// does not know RebootPolicies (the release before them) is not held to them.
func (c *Checker) Pools(key string, limits map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.poolKey, c.pools, c.poolOver, c.poolPeaks = key, limits, map[string]int{}, map[string]int{}
}

// JudgePools starts judging the pools' budgets (Pools) from the first moment every pool is within its
// budget: an operator that knew no pools may have left one above it, which the next does not undo.
func (c *Checker) JudgePools() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.poolsOn = true
	c.checkBudget()
}

// PoolPeaks are the most nodes of each pool unavailable at once while judged.
func (c *Checker) PoolPeaks() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.poolPeaks {
		out[k] = v
	}
	return out
}

// checkPools compares each pool's unavailable nodes with its budget: one violation per episode above it,
// and another each time the episode reaches a new high.
func (c *Checker) checkPools() {
	if !c.poolsOn {
		return
	}
	busy := map[string][]string{}
	for name, s := range c.nodes {
		if s.last == nil {
			continue
		}
		pool, ok := s.last.Labels[c.poolKey]
		if _, judged := c.pools[pool]; !ok || !judged {
			continue
		}
		if why := Unavailable(s.last); len(why) > 0 {
			busy[pool] = append(busy[pool], name+"("+strings.Join(why, ",")+")")
		}
	}
	if !c.poolsArmed {
		for pool, limit := range c.pools {
			if len(busy[pool]) > limit {
				return
			}
		}
		c.poolsArmed = true
	}
	for pool, limit := range c.pools {
		n := len(busy[pool])
		if n > c.poolPeaks[pool] {
			c.poolPeaks[pool] = n
		}
		if n <= limit {
			delete(c.poolOver, pool)
			continue
		}
		if high, over := c.poolOver[pool]; over && n <= high {
			continue
		}
		c.poolOver[pool] = n
		sort.Strings(busy[pool])
		c.violate(PoolBudget, "", "%d nodes of pool %s unavailable at once, its budget %d: %s", n, pool, limit, strings.Join(busy[pool], " "))
	}
}

// checkBudget compares the nodes unavailable right now with the budget. One violation per episode
// above the budget, and another each time the episode reaches a new high.
func (c *Checker) checkBudget() {
	c.checkPools()
	var busy []string
	for name, s := range c.nodes {
		if s.last == nil {
			continue
		}
		if why := Unavailable(s.last); len(why) > 0 {
			busy = append(busy, name+"("+strings.Join(why, ",")+")")
		}
	}
	n := len(busy)
	if n > c.peak {
		c.peak = n
	}
	if n <= c.limit {
		c.over, c.overHigh = false, 0
		return
	}
	if c.over && n <= c.overHigh {
		return
	}
	c.over, c.overHigh = true, n
	sort.Strings(busy)
	c.violate(Budget, "", "%d nodes unavailable at once, budget %d: %s", n, c.limit, strings.Join(busy, " "))
}

// ----- Pods and PDBs -----

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (c *Checker) observePod(p *corev1.Pod, firstRV uint64) {
	rv := c.rv(p.ResourceVersion)
	s := c.pods[podKey(p)]
	if s == nil || s.gone {
		if firstRV == 0 {
			firstRV = rv
		}
		s = &podState{namespace: p.Namespace, name: p.Name, firstRV: firstRV}
		c.pods[podKey(p)] = s
	}
	s.node, s.labels, s.ready = p.Spec.NodeName, labels.Set(p.Labels), podReady(p)
	if p.DeletionTimestamp != nil && !s.deleting {
		s.deleting = true
		if s.deleteRV == 0 {
			s.deleteRV = rv
		}
	}
}

// ObservePod takes one Pod from the watch (added or modified).
func (c *Checker) ObservePod(p *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observePod(p, 0)
	c.podProgress(c.rv(p.ResourceVersion))
	c.checkPDBs()
}

// DeletePod takes a Pod's deletion from the watch (its resourceVersion is the deletion's).
func (c *Checker) DeletePod(p *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rv := c.rv(p.ResourceVersion)
	if s := c.pods[podKey(p)]; s != nil && !s.gone {
		s.gone, s.deleting = true, true
		if s.deleteRV == 0 {
			s.deleteRV = rv
		}
	}
	c.podProgress(rv)
	c.checkPDBs()
}

// PodBookmark says the pod watch has delivered everything up to rv.
func (c *Checker) PodBookmark(rv string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.podProgress(c.rv(rv))
}

// ReplacePods takes a complete list of Pods at resourceVersion listRV.
func (c *Checker) ReplacePods(list []corev1.Pod, listRV string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.relists["pods"]++
	seen := map[string]bool{}
	for i := range list {
		p := &list[i]
		seen[podKey(p)] = true
		if s := c.pods[podKey(p)]; s != nil && !s.gone {
			c.observePod(p, 0)
			continue
		}
		c.observePod(p, c.rv(p.ResourceVersion))
	}
	for k, s := range c.pods {
		if !seen[k] && !s.gone {
			s.gone, s.deleting = true, true
			if s.deleteRV == 0 {
				s.deleteRV = unknownRV
			}
		}
	}
	c.podProgress(c.rv(listRV))
	c.checkPDBs()
}

func (c *Checker) podProgress(rv uint64) {
	if rv > c.podRV {
		c.podRV = rv
	}
	c.checkGrants()
}

// checkGrants judges the grants whose moment the pod watch has passed: a pod that was on the node
// before it was cordoned (so the drain saw it) and was not yet being deleted when reboot-ok was granted
// means the node was let go before its drain finished.
func (c *Checker) checkGrants() {
	keep := c.grants[:0]
	for _, g := range c.grants {
		if c.podRV < g.grantRV {
			keep = append(keep, g)
			continue
		}
		c.judgeGrant(g)
	}
	c.grants = keep
}

func (c *Checker) judgeGrant(g grantCheck) {
	var left []string
	for k, p := range c.pods {
		if p.node != g.node || p.firstRV >= g.cordonRV || p.deleteRV == unknownRV {
			continue
		}
		if p.deleteRV == 0 || p.deleteRV > g.grantRV {
			left = append(left, k)
		}
	}
	if len(left) > 0 {
		sort.Strings(left)
		c.violations = append(c.violations, Violation{At: g.at.Sub(c.start), Kind: Drain, Node: g.node, Msg: fmt.Sprintf("reboot-ok granted (rv %d) while pods there since before the cordon (rv %d) were not evicted: %s", g.grantRV, g.cordonRV, strings.Join(left, " "))})
	}
}

// ObservePDB takes a PodDisruptionBudget (added or modified).
func (c *Checker) ObservePDB(p *policyv1.PodDisruptionBudget) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observePDB(p)
	c.checkPDBs()
}

func (c *Checker) observePDB(p *policyv1.PodDisruptionBudget) {
	k := p.Namespace + "/" + p.Name
	s := c.pdbs[k]
	if s == nil {
		s = &pdbState{namespace: p.Namespace, name: p.Name}
		c.pdbs[k] = s
	}
	s.minAvailable = -1
	if m := p.Spec.MinAvailable; m != nil && m.Type == 0 {
		s.minAvailable = int(m.IntVal)
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
	if err != nil {
		sel = labels.Nothing()
	}
	s.selector = sel
}

// DeletePDB forgets a PodDisruptionBudget.
func (c *Checker) DeletePDB(namespace, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pdbs, namespace+"/"+name)
}

// ReplacePDBs takes a complete list of PodDisruptionBudgets.
func (c *Checker) ReplacePDBs(list []policyv1.PodDisruptionBudget) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.relists["pdbs"]++
	seen := map[string]bool{}
	for i := range list {
		seen[list[i].Namespace+"/"+list[i].Name] = true
		c.observePDB(&list[i])
	}
	for k := range c.pdbs {
		if !seen[k] {
			delete(c.pdbs, k)
		}
	}
	c.checkPDBs()
}

// checkPDBs: a workload protected by minAvailable must never have fewer Ready pods (not being
// deleted) than that, once it had that many. Only evictions take pods away here, and the Eviction
// API refuses those that would break the budget.
func (c *Checker) checkPDBs() {
	for _, b := range c.pdbs {
		if b.minAvailable < 0 {
			continue
		}
		healthy := 0
		var names []string
		for _, p := range c.pods {
			if p.namespace == b.namespace && !p.gone && !p.deleting && p.ready && b.selector.Matches(p.labels) {
				healthy++
				names = append(names, p.name)
			}
		}
		if healthy >= b.minAvailable {
			b.armed, b.below = true, false
			continue
		}
		if b.armed && !b.below {
			b.below = true
			sort.Strings(names)
			c.violate(PDB, "", "PDB %s/%s: %d healthy pods, minAvailable %d (left: %s)", b.namespace, b.name, healthy, b.minAvailable, strings.Join(names, " "))
		}
	}
}

// ----- What the scenario tells -----

// Staged records that one more update was staged on node (update_engine will ask for a reboot).
func (c *Checker) Staged(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.node(node).staged++
}

// Rebooted records that node's machine completed its boots-th reboot (a count the simulation keeps).
// More reboots than updates staged is a reboot nobody asked for.
func (c *Checker) Rebooted(node string, boots int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.node(node)
	if boots > s.staged {
		c.violate(Update, node, "reboot #%d but only %d updates were staged (a reboot nobody asked for, or two for one update)", boots, s.staged)
	}
	s.boots = boots
}

// NeverBack records that node's machine was made not to come back from its next reboot: it may stay
// cordoned and granted, and it must end up marked stalled.
func (c *Checker) NeverBack(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.node(node).neverBack = true
}

// Settled reports whether every node is out of its cycle with every staged update rebooted (the
// never-returning ones: all but the last, and marked stalled if requireStalled), and why not.
func (c *Checker) Settled(requireStalled bool) (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := c.sortedNodes()
	for _, name := range names {
		s := c.nodes[name]
		if s.last == nil {
			continue
		}
		if s.neverBack {
			if requireStalled && s.last.Annotations[KeyStalled] == "" {
				return false, name + " (never returns) not marked stalled yet"
			}
			continue
		}
		if s.boots < s.staged {
			return false, fmt.Sprintf("%s: %d of %d staged updates rebooted", name, s.boots, s.staged)
		}
		if why := Unavailable(s.last); len(why) > 0 {
			return false, name + " still " + strings.Join(why, ",")
		}
	}
	return true, ""
}

// Final checks the end state and closes the open judgements: no node but the never-returning ones
// left cordoned, granted or rebooting; those carry the stalled mark (when requireStalled); no stalled
// mark left on a node that moved on; every staged update rebooted exactly once.
func (c *Checker) Final(requireStalled bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.grants {
		c.judgeGrant(g)
	}
	c.grants = nil
	c.judgeVersions()
	for _, name := range c.sortedNodes() {
		s := c.nodes[name]
		if s.neverBack {
			if s.boots != s.staged-1 {
				c.violate(Update, name, "never-returning node rebooted %d times for %d staged updates (want %d: the last one never comes back)", s.boots, s.staged, s.staged-1)
			}
			if requireStalled && !s.stalledWhenDeleted && (s.last == nil || s.last.Annotations[KeyStalled] == "") {
				c.violate(EndState, name, "never came back but carries no %s annotation", KeyStalled)
			}
			continue
		}
		if s.boots != s.staged {
			asked := ""
			if s.last != nil {
				asked = fmt.Sprintf(" (reboot-needed=%q, reboot-ok=%q)", s.last.Annotations[KeyRebootNeeded], s.last.Annotations[KeyRebootOK])
			}
			c.violate(Update, name, "%d updates staged, %d reboots%s", s.staged, s.boots, asked)
		}
		if s.last == nil {
			continue
		}
		a := s.last.Annotations
		if a[KeyCordoned] == "true" || s.last.Spec.Unschedulable {
			c.violate(EndState, name, "left cordoned (unschedulable=%v, %s=%q)", s.last.Spec.Unschedulable, KeyCordoned, a[KeyCordoned])
		}
		if a[KeyRebootOK] == "true" || a[KeyRebootInProgress] == "true" {
			c.violate(EndState, name, "left in a cycle (reboot-ok=%q, reboot-in-progress=%q)", a[KeyRebootOK], a[KeyRebootInProgress])
		}
		if v := a[KeyStalled]; v != "" {
			c.violate(EndState, name, "%s=%q left on a node that finished its cycle", KeyStalled, v)
		}
	}
}

func (c *Checker) sortedNodes() []string {
	names := make([]string, 0, len(c.nodes))
	for n := range c.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Annotation is key's value on node as the checker last saw it ("" if absent or unseen).
func (c *Checker) Annotation(node, key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.nodes[node]; s != nil && s.last != nil {
		return s.last.Annotations[key]
	}
	return ""
}

// Violations found so far.
func (c *Checker) Violations() []Violation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Violation(nil), c.violations...)
}

// Stats is what progress lines show.
type Stats struct {
	Cycles      int // grants that ended after the machine came back in a new boot
	Unavailable int // nodes counting against the budget now
	Peak        int // most nodes unavailable at one instant
	Violations  int
	Relists     int // node relists after the first list: moments the checker could not follow continuously
}

// Stats returns the current figures.
func (c *Checker) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Stats{Cycles: c.cycles, Peak: c.peak, Violations: len(c.violations)}
	for _, s := range c.nodes {
		if s.last != nil && len(Unavailable(s.last)) > 0 {
			st.Unavailable++
		}
	}
	if r := c.relists["nodes"]; r > 1 {
		st.Relists = r - 1
	}
	return st
}

// Notes says which checks could not run.
func (c *Checker) Notes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var notes []string
	if !c.rvsSane {
		notes = append(notes, "resourceVersions are not integers: the pods-left-at-grant check was off")
	}
	return notes
}
