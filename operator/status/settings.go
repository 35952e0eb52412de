package status

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/operator/policy"
)

// settings are the operator's settings as the view needs them: its default policy, compiled with
// policy.Compile from the policies it published (fleetswitch.KeyPolicies), or -- from an operator
// that publishes none (before them, or one whose Config was not compiled from a Spec) -- from the copy
// in its Status. pol is nil when they are unknown, and why says why.
type settings struct {
	pol *policy.Policy
	why string
}

func settingsOf(cm *corev1.ConfigMap, st fleetswitch.Status, published bool) settings {
	if !published {
		return settings{why: "the operator has published no status"}
	}
	spec, err := publishedSpec(cm, st)
	if err == nil {
		var p *policy.Policy
		if p, err = policy.Compile(spec); err == nil {
			return settings{pol: p}
		}
	}
	return settings{why: "the operator's published policy: " + err.Error()}
}

// publishedSpec is the default policy as published, or as the Status's copy says.
func publishedSpec(cm *corev1.ConfigMap, st fleetswitch.Status) (policy.Spec, error) {
	if cm != nil && cm.Data[fleetswitch.KeyPolicies] != "" {
		raw := cm.Data[fleetswitch.KeyPolicies]
		p, err := policy.ReadPublished(raw)
		if err != nil {
			return policy.Spec{}, err
		}
		if s, ok := p.Default(); ok {
			return s, nil
		}
		return policy.Spec{}, fmt.Errorf("no default policy among %d published", len(p.Policies))
	}
	return statusSpec(st)
}

// statusSpec reads the settings an operator without published policies copied into its Status (the
// rest are the defaults: the view does not need them). Goes with that copy, one release after it.
func statusSpec(st fleetswitch.Status) (policy.Spec, error) {
	s := policy.Defaults()
	s.MaxUnavailable, s.MaxUnavailablePerGroup, s.GroupLabel = st.MaxUnavailable, st.MaxUnavailablePerGroup, st.GroupLabel
	if st.MaxUnavailableControlPlane != "" {
		s.MaxUnavailableControlPlane = st.MaxUnavailableControlPlane
	}
	if st.ControlPlaneOrder != "" {
		s.ControlPlaneOrder = st.ControlPlaneOrder
	}
	if st.StallPolicy != "" {
		s.StallPolicy = st.StallPolicy
	}
	s.Windows, s.Exclusions = st.Windows, st.Exclusions
	if w := st.FLUOWindow; w != nil {
		s.FLUOWindow = policy.FLUOWindow{Start: w.Start, Length: w.Length, TimeZone: w.TimeZone}
	}
	s.MaxFailedReboots = st.MaxFailedReboots
	s.Canary.Nodes, s.Canary.MaxFailedPerVersion = st.CanaryNodes, st.MaxFailedPerVersion
	for _, d := range []struct {
		v   string
		dst *metav1.Duration
	}{{st.CanaryBake, &s.Canary.Bake}, {st.RebootTimeout, &s.RebootTimeout}, {st.SettleTime, &s.Settle.Time}} {
		*d.dst = metav1.Duration{}
		if d.v == "" {
			continue
		}
		t, err := time.ParseDuration(d.v)
		if err != nil {
			return s, fmt.Errorf("status: %w", err)
		}
		d.dst.Duration = t
	}
	return s, nil
}

// publishedDuration is a published duration as the view shows it ("" none).
func publishedDuration(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return d.String()
}
