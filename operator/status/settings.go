package status

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/operator/policy"
)

// settings are the operator's settings as the view needs them: its default policy, compiled with
// policy.Compile from the policies it published (fleetswitch.KeyPolicies). pol is nil when they are
// unknown, and why says why: no Status, no policies published (an operator older than the published
// policies), or policies this build cannot read.
type settings struct {
	pol *policy.Policy
	why string
}

// noPolicies is why the settings are unknown when the operator published its Status but no policies.
const noPolicies = "the operator published no policies: it is older than this kubectl slipway, or not running; upgrade it"

// settingsOf reads the settings from the slipway-fleet ConfigMap cm; published: a Status is in it.
func settingsOf(cm *corev1.ConfigMap, published bool) settings {
	if !published {
		return settings{why: "the operator has published no status"}
	}
	if cm == nil || cm.Data[fleetswitch.KeyPolicies] == "" {
		return settings{why: noPolicies}
	}
	spec, err := publishedSpec(cm.Data[fleetswitch.KeyPolicies])
	if err == nil {
		var p *policy.Policy
		if p, err = policy.Compile(spec); err == nil {
			return settings{pol: p}
		}
	}
	return settings{why: "the operator's published policy: " + err.Error()}
}

// publishedSpec is the default policy among the published ones (raw).
func publishedSpec(raw string) (policy.Spec, error) {
	p, err := policy.ReadPublished(raw)
	if err != nil {
		return policy.Spec{}, err
	}
	if s, ok := p.Default(); ok {
		return s, nil
	}
	return policy.Spec{}, fmt.Errorf("no default policy among %d published", len(p.Policies))
}

// publishedDuration is a published duration as the view shows it ("" none).
func publishedDuration(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return d.String()
}
