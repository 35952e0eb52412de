package policy

// RebootPolicy objects become the pools the operator runs: each policy's Spec is the flags' Spec (the
// default policy) with what the object sets (MergeSpec), compiled by Compile (CompilePool); a node
// belongs to the matching policy of the highest priority (PoolSet). Pure: no client, no informer.

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/slipway-dev/slipway/api/v1alpha1"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/blocker"
	"github.com/slipway-dev/slipway/operator/budget"
	"github.com/slipway-dev/slipway/operator/health"
)

// Pool is one RebootPolicy as the operator runs it. Never changed once built.
type Pool struct {
	Name       string
	Generation int64
	// UID of the RebootPolicy object: pins tell a policy created again under its name apart.
	UID string
	// Deleted: the policy is gone and this is what holds its nodes for a grace period (the controller).
	Deleted  bool
	Priority int32
	Selector labels.Selector // nil when the selector does not parse (Err says why)
	// Spec: the default policy's Spec with what the object sets (published as this pool's policy).
	Spec Spec
	// Policy: Spec compiled (nil when Err); Admission: what admission reads of it (Invalid set when Err).
	Policy    *Policy
	Admission *admission.Rules
	// Max: the pool's own budget (nil: only the fleet's and the groups').
	Max *budget.Max
	// HealthChecks and PodSelectors: the pool's own gates, on top of the flags' (the controller turns
	// them into blockers).
	HealthChecks []*health.Check
	PodSelectors []string
	// Err: why the spec is not accepted (a parser's message), "" when it is.
	Err string
}

// Merge is the Spec a RebootPolicy gives its nodes: def (the flags') with what spec sets. A list that
// is set replaces the flags' (an empty list: none), but for exclusions, which add to the flags'; a
// field left out keeps the flags' value.
func MergeSpec(def Spec, spec v1alpha1.RebootPolicySpec) Spec {
	s := def
	if spec.Windows != nil {
		s.Windows = spec.Windows
		s.FLUOWindow = FLUOWindow{} // the pool's windows replace all of the flags' windows
	}
	// A change freeze guards the whole fleet: a pool adds its own, it cannot lift the flags'.
	s.Exclusions = append(append([]string(nil), def.Exclusions...), spec.Exclusions...)
	if c := spec.Canary; c != nil {
		if c.Nodes != nil {
			s.Canary.Nodes = int(*c.Nodes)
		}
		if c.Bake != nil {
			s.Canary.Bake = *c.Bake
		}
	}
	if v := spec.Versions; v != nil {
		if v.Allow != nil {
			s.Versions.Allow = v.Allow
		}
		// A version denied by the flags is denied everywhere: a pool adds its own.
		s.Versions.Deny = append(append([]string(nil), def.Versions.Deny...), v.Deny...)
		setIf(&s.Versions.MinAge, v.MinAge)
		if r := v.RequireProof; r != nil {
			setIf(&s.Versions.RequireProof.Selector, r.Selector)
			if r.MinCycles != nil {
				s.Versions.RequireProof.MinCycles = int(*r.MinCycles)
			}
			setIf(&s.Versions.RequireProof.Soak, r.Soak)
		}
	}
	if u := spec.Update; u != nil {
		setIf(&s.Update.Group, u.Group)
		setIf(&s.Update.Server, u.Server)
	}
	if st := spec.Settle; st != nil {
		setIf(&s.Settle.Time, st.Time)
		setIf(&s.Settle.PDBs, st.PDBs)
		setIf(&s.Settle.Timeout, st.Timeout)
	}
	if st := spec.Steering; st != nil {
		setIf(&s.Steering.PreferNoScheduleTaint, st.PreferNoScheduleTaint)
		setIf(&s.Steering.ExcludeFromLoadBalancers, st.ExcludeFromLoadBalancers)
		if st.PreLabels != nil {
			s.Steering.PreLabels = st.PreLabels
		}
		if st.PostLabels != nil {
			s.Steering.PostLabels = st.PostLabels
		}
	}
	if d := spec.Drain; d != nil {
		setIf(&s.Drain.Timeout, d.Timeout)
		setIf(&s.Drain.GracePeriod, d.GracePeriod)
		setIf(&s.Drain.PodSelector, d.PodSelector)
		setIf(&s.Drain.FailurePolicy, d.FailurePolicy)
	}
	return s
}

// set copies a field the policy sets over the flags'.
func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// CompilePool builds the Pool of rp over the flags' Spec def. A spec the schema let through but the
// parsers refuse gives a Pool with Err set, whose nodes are held: never admitted under a policy that
// did not compile.
func CompilePool(def Spec, rp *v1alpha1.RebootPolicy) *Pool {
	p := compilePool(def, rp)
	if p.Err == "" && p.Spec.Settle.PDBs && !def.Settle.PDBs {
		p.Refuse("settle.pdbs: the update-operator runs with --settle-pdbs=false and so does not watch PodDisruptionBudgets; turn the flag on or leave settle.pdbs out")
	}
	return p
}

// Refuse marks p not accepted for why: its nodes are held (admission.Rules.Invalid) and nothing
// compiled of it is used.
func (p *Pool) Refuse(why string) {
	p.Err, p.Policy = why, nil
	p.Admission = &admission.Rules{Name: p.Name, Generation: p.Generation, UID: p.UID, Invalid: why}
}

func compilePool(def Spec, rp *v1alpha1.RebootPolicy) *Pool {
	p := &Pool{Name: rp.Name, Generation: rp.Generation, UID: string(rp.UID), Priority: rp.Spec.Priority, Spec: MergeSpec(def, rp.Spec)}
	fail := func(err error) *Pool {
		p.Refuse(err.Error())
		return p
	}
	sel, err := metav1.LabelSelectorAsSelector(&rp.Spec.NodeSelector)
	if err != nil {
		return fail(fmt.Errorf("nodeSelector: %w", err))
	}
	if sel.Empty() {
		return fail(fmt.Errorf("nodeSelector is empty: the update-operator's flags are the policy of every node"))
	}
	if err := selectorKeys(rp.Spec.NodeSelector); err != nil {
		return fail(err)
	}
	p.Selector = sel
	if m := rp.Spec.MaxUnavailable; m != nil {
		max, err := ParseMax(*m)
		if err != nil {
			return fail(fmt.Errorf("maxUnavailable: %w", err))
		}
		p.Max = &max
	}
	compiled, err := Compile(p.Spec)
	if err != nil {
		return fail(err)
	}
	for _, spec := range rp.Spec.HealthChecks {
		c, err := health.Parse(spec)
		if err != nil {
			return fail(fmt.Errorf("healthChecks: %w", err))
		}
		p.HealthChecks = append(p.HealthChecks, c)
	}
	if _, err := blocker.ParseSelectors(rp.Spec.BlockingPodSelectors); err != nil {
		return fail(fmt.Errorf("blockingPodSelectors: %w", err))
	}
	p.PodSelectors = rp.Spec.BlockingPodSelectors
	p.Policy = compiled
	a := compiled.Admission()
	a.Name, a.Generation, a.UID = rp.Name, rp.Generation, p.UID
	if rp.Spec.Paused {
		a.Paused = "policy " + rp.Name + " paused"
		if r := strings.TrimSpace(rp.Spec.PausedReason); r != "" {
			a.Paused += ": " + r
		}
	}
	p.Admission = a
	return p
}

// selectorKeys refuses a selector on a label a node writes itself (the agent's, FLUO's, FleetLock's):
// the node could choose its own pool, and with it its window and budget. Slipway's own keys are
// refused too.
func selectorKeys(sel metav1.LabelSelector) error {
	keys := []string{}
	for k := range sel.MatchLabels {
		keys = append(keys, k)
	}
	for _, e := range sel.MatchExpressions {
		keys = append(keys, e.Key)
	}
	for _, k := range keys {
		switch owner := protocol.Owners[k]; {
		case owner == "":
		case owner.OnNode():
			return fmt.Errorf("nodeSelector: %s is written by the %s on each node: a node could choose its own policy; select on a label only an admin sets (node-restriction.kubernetes.io/<name>, which kubelets cannot set)", k, owner)
		default:
			return fmt.Errorf("nodeSelector: %s is a protocol key written by the %s; select on a label of your own", k, owner)
		}
	}
	return nil
}

// ParseMax reads a pool's maxUnavailable: a count of at least 1 or a percentage.
func ParseMax(v intstr.IntOrString) (budget.Max, error) {
	if v.Type == intstr.Int {
		if v.IntVal < 1 {
			return budget.Max{}, fmt.Errorf("%d: want at least 1 (pause the policy to stop its nodes)", v.IntVal)
		}
		return budget.ParseMax(strconv.Itoa(int(v.IntVal)))
	}
	return budget.ParseMax(v.StrVal)
}

// Set is the pools at one moment. Never changed once built: a change of any RebootPolicy builds a new
// Set.
type PoolSet struct {
	pools  []*Pool // by priority, highest first, then by name
	byName map[string]*Pool
}

// NewSet orders the pools for Select.
func NewPoolSet(pools []*Pool) *PoolSet {
	s := &PoolSet{pools: append([]*Pool(nil), pools...), byName: map[string]*Pool{}}
	sort.Slice(s.pools, func(i, j int) bool {
		if s.pools[i].Priority != s.pools[j].Priority {
			return s.pools[i].Priority > s.pools[j].Priority
		}
		return s.pools[i].Name < s.pools[j].Name
	})
	for _, p := range s.pools {
		s.byName[p.Name] = p
	}
	return s
}

// Pools are the pools, highest priority first.
func (s *PoolSet) Pools() []*Pool {
	if s == nil {
		return nil
	}
	return s.pools
}

// Get is the pool named name (nil: none).
func (s *PoolSet) Get(name string) *Pool {
	if s == nil {
		return nil
	}
	return s.byName[name]
}

// Select is the pool of a node with labels l: the matching pool of the highest priority ("" none: the
// default policy). When several match at that priority, name is "" and tied names them (sorted): the
// node is held until they no longer tie. A pool whose selector does not parse matches nothing.
func (s *PoolSet) Select(l labels.Labels) (name string, tied []string) {
	if s == nil {
		return "", nil
	}
	for i, p := range s.pools {
		if p.Selector == nil || !p.Selector.Matches(l) {
			continue
		}
		for _, q := range s.pools[i+1:] {
			if q.Priority != p.Priority {
				break
			}
			if q.Selector != nil && q.Selector.Matches(l) {
				tied = append(tied, q.Name)
			}
		}
		if len(tied) > 0 {
			return "", append([]string{p.Name}, tied...)
		}
		return p.Name, nil
	}
	return "", nil
}

// Of is the policy of Node n: the one pinned at its admission (protocol.AdmittedPolicy, the operator's
// own key) while it is in its cycle, else Select over its labels; tied names the policies that tie
// ("" none). The operator indexes nodes by it, the status view shows it.
func (s *PoolSet) Of(n *corev1.Node, inCycle bool) (name, tied string) {
	if inCycle {
		if v, ok := n.Annotations[protocol.AdmittedPolicy]; ok {
			name, _, _ = strings.Cut(v, "/")
			return name, ""
		}
	}
	name, t := s.Select(labels.Set(n.Labels))
	return name, strings.Join(t, ", ")
}

// Window is where the pool's window stands at now: "invalid" (its spec did not compile), "paused",
// "open" or "closed" (next: when it opens; zero: not within 400 days). The operator's status and the
// view say the same.
func (p *Pool) Window(now time.Time) (state string, next time.Time) {
	a := p.Admission
	switch {
	case p.Err != "":
		return "invalid", time.Time{}
	case a.Paused != "":
		return "paused", time.Time{}
	case a.Schedule == nil || a.Schedule.Open(now):
		return "open", time.Time{}
	}
	return "closed", a.Schedule.NextOpen(now)
}

// Limits are the pools' own budgets, by name (admission.Limits.Policies).
func (s *PoolSet) Limits() map[string]budget.Max {
	out := map[string]budget.Max{}
	for _, p := range s.Pools() {
		if p.Max != nil {
			out[p.Name] = *p.Max
		}
	}
	return out
}
