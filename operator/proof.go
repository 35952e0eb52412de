package operator

import (
	"sort"
	"time"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/admission"
)

// VersionProofs is what this cluster proved of each OS version the Nodes or the fleet's memory name,
// by the flags' canaries (admission.ProofOf): the series slipway_version_* another cluster's gate
// reads (FleetView).
func (c *Controller) VersionProofs(now time.Time) []admission.Proof {
	view := c.store.View()
	nodes := c.Nodes()
	entries := make([]admission.Node, len(nodes))
	for i, n := range nodes {
		entries[i] = admission.Of(n, "", "")
	}
	stats := admission.VersionsOf(entries)
	for _, v := range view.KnownVersions() {
		if stats[v] == nil {
			stats[v] = &admission.VersionStats{}
		}
	}
	out := make([]admission.Proof, 0, len(stats))
	for v, s := range stats {
		if v == "" {
			continue
		}
		_, halted := view.VersionHalt(v)
		out = append(out, admission.ProofOf(v, admission.WithMemory(*s, v, view), c.cfg.Policy.Canary, view.VersionResumedAt(v), halted, now))
	}
	sort.Slice(out, func(i, j int) bool { return protocol.CompareVersions(out[i].Version, out[j].Version) < 0 })
	return out
}
