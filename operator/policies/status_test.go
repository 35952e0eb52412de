package policies

import (
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/slipway-dev/slipway/api/v1alpha1"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/argohealth"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/policy"
)

// The kstatus conditions GitOps engines wait on, at known states of a pool: Ready, Reconciling and
// Stalled with the pool's generation.
func TestKstatusConditions(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	health, err := os.ReadFile("../../deploy/argocd/resource_customizations/update.slipway.dev/RebootPolicy/health.lua")
	if err != nil {
		t.Fatal(err)
	}
	rp := &v1alpha1.RebootPolicy{ObjectMeta: metav1.ObjectMeta{Name: "prod", Generation: 4},
		Spec: v1alpha1.RebootPolicySpec{NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "prod"}},
			Versions: &v1alpha1.Versions{Deny: []string{"4459.2.3"}}}}
	pool := policy.CompilePool(policy.Defaults(), rp)
	if pool.Err != "" {
		t.Fatal(pool.Err)
	}
	idle := admission.Node{State: protocol.Idle, Version: "4459.2.1"}
	for _, c := range []struct {
		name                        string
		nodes                       []admission.Node
		ready, reconciling, stalled metav1.ConditionStatus
		readyReason                 string
		argo                        string // what the shipped Argo CD health check makes of it
	}{
		{"all on an allowed version", []admission.Node{idle, idle}, "True", "False", "False", "AllowedAndHealthy", "Healthy"},
		{"rolling out", []admission.Node{idle, {State: protocol.Draining, Version: "4459.2.1", AskedVersion: "4459.2.2"}}, "True", "True", "False", "AllowedAndHealthy", "Progressing"},
		{"a node on a denied version", []admission.Node{idle, {State: protocol.Idle, Version: "4459.2.3"}}, "False", "False", "False", "VersionNotAllowed", "Degraded"},
		{"a node asks for the version it failed on", []admission.Node{idle, {State: protocol.NeedsReboot, Version: "4459.2.1", AskedVersion: "4459.2.2", FailedVersion: "4459.2.2"}}, "False", "True", "True", "Stalled", "Degraded"},
		{"a node stalled in its cycle", []admission.Node{{State: protocol.Rebooting, Version: "4459.2.1", AskedVersion: "4459.2.2", StalledVersion: "4459.2.2"}}, "False", "True", "True", "Stalled", "Degraded"},
	} {
		st := policyStatus(pool, v1alpha1.RebootPolicyStatus{}, c.nodes, nil, nil, nil, now)
		for typ, want := range map[string]metav1.ConditionStatus{"Ready": c.ready, "Reconciling": c.reconciling, "Stalled": c.stalled} {
			got := meta.FindStatusCondition(st.Conditions, typ)
			if got == nil || got.Status != want || got.ObservedGeneration != 4 {
				t.Errorf("%s: %s = %+v, want %s at generation 4", c.name, typ, got, want)
			}
		}
		if r := meta.FindStatusCondition(st.Conditions, "Ready"); r != nil && r.Reason != c.readyReason {
			t.Errorf("%s: Ready reason %q, want %q", c.name, r.Reason, c.readyReason)
		}
		obj := rp.DeepCopy()
		obj.Status = st
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		if got, msg, err := argohealth.Evaluate(health, u); err != nil || got != c.argo {
			t.Errorf("%s: Argo CD health %s %q (%v), want %s", c.name, got, msg, err, c.argo)
		}
	}
	refused := policy.CompilePool(policy.Defaults(), &v1alpha1.RebootPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad", Generation: 2},
		Spec: v1alpha1.RebootPolicySpec{NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "bad"}}, Windows: []string{"Moonday"}}})
	st := policyStatus(refused, v1alpha1.RebootPolicyStatus{}, nil, nil, nil, nil, now)
	if !meta.IsStatusConditionTrue(st.Conditions, "Stalled") || meta.IsStatusConditionTrue(st.Conditions, "Ready") {
		t.Errorf("a refused spec: %+v", st.Conditions)
	}
}
