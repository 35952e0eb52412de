package referee

import "testing"

// A grant into a version is judged by the generation its pin names: denied there, a violation;
// denied only by a later edit (the node keeps its admission's decision), or by no recorded
// generation, none.
func TestVersionGrants(t *testing.T) {
	c := newChecker(5)
	c.DenyVersions("a", 2, []string{"4500.3.0"})
	c.DenyVersions("a", 3, nil)
	c.DenyVersions("b", 4, []string{"4500.4.0"})
	grant := func(name string, rv int, pin, version string) {
		c.ObserveNode(node(name, rv, "boot-1", KeyRebootOK, "false"))
		kv := append([]string{KeyAdmittedPolicy, pin, KeyNewVersion, version}, granted...)
		c.ObserveNode(node(name, rv+1, "boot-1", kv...))
	}
	grant("denied", 10, "a/2/0123abcd", "4500.3.0")      // denied at its own generation
	grant("before-edit", 20, "b/3/0123abcd", "4500.4.0") // denied only from generation 4 on
	grant("lifted", 30, "a/3/0123abcd", "4500.3.0")      // the deny lifted at generation 3
	grant("flags", 40, "", "4500.3.0")                   // the flags' policy: no pin
	// Granted for 4500.2.0 (reboot-version), seen first when back and already staging the denied one.
	c.ObserveNode(node("staged-next", 50, "boot-1", KeyRebootOK, "false"))
	c.ObserveNode(node("staged-next", 51, "boot-1", append([]string{KeyAdmittedPolicy, "a/2/0123abcd", KeyRebootVersion, "4500.2.0", KeyNewVersion, "4500.3.0"}, granted...)...))
	if n := c.VersionGrants(); n != 4 {
		t.Errorf("%d grants under a pin noted, want 4", n)
	}
	c.Final(false)
	var got []string
	for _, v := range c.Violations() {
		if v.Kind == Version {
			got = append(got, v.Node)
		}
	}
	if len(got) != 1 || got[0] != "denied" {
		t.Errorf("version violations on %v, want [denied]", got)
	}
}
