package referee

import (
	"slices"
	"strconv"
	"strings"
)

// KeyAdmittedPolicy is the pin the operator writes at admission: "<policy>/<generation>/<uid prefix>".
const KeyAdmittedPolicy = "update.slipway.dev/admitted-policy"

// Version is the kind of violation where a node was granted a reboot into a version the policy it was
// admitted under denied (at the generation it was admitted under).
const Version = "version"

// versionGrant is one grant seen: the pin the node was admitted under and the version it rebooted for.
type versionGrant struct {
	node, pin, version string
}

// DenyVersions records that RebootPolicy policy at generation denies exactly these versions (the
// scenario's edits; a generation never recorded denies none). Grants are judged against them in
// Final, by the generation each node's pin names: a node admitted before an edit keeps its decision.
func (c *Checker) DenyVersions(policy string, generation int64, deny []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.denied == nil {
		c.denied = map[string][]string{}
	}
	c.denied[policy+"/"+strconv.FormatInt(generation, 10)] = slices.Clone(deny)
}

// noteVersionGrant remembers a grant for the version judgement (c.mu held).
func (c *Checker) noteVersionGrant(node, pin, version string) {
	if version == "" || pin == "" {
		return
	}
	c.versionGrants = append(c.versionGrants, versionGrant{node: node, pin: pin, version: version})
}

// judgeVersions reports every grant into a version its pinned generation denied (c.mu held).
func (c *Checker) judgeVersions() {
	for _, g := range c.versionGrants {
		parts := strings.SplitN(g.pin, "/", 3)
		if len(parts) < 2 {
			continue
		}
		if slices.Contains(c.denied[parts[0]+"/"+parts[1]], g.version) {
			c.violate(Version, g.node, "granted a reboot into %s, which RebootPolicy %s denied at generation %s, the one it was admitted under", g.version, parts[0], parts[1])
		}
	}
	c.versionGrants = nil
}

// VersionGrants is how many grants under a RebootPolicy the version judgement will look at.
func (c *Checker) VersionGrants() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.versionGrants)
}
