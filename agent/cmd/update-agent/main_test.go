package main

import (
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/internal/testsupport/docs"

	"github.com/slipway-dev/slipway/internal/flagenv"
	"github.com/slipway-dev/slipway/internal/kubeclient"
)

func TestFlags(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	t.Setenv("UPDATE_AGENT_HOST_ROOT", "/host")
	o, _, err := parse([]string{"--node=n1"})
	if err != nil {
		t.Fatal(err)
	}
	if o.node != "n1" || o.hostRoot != "/host" || o.rebootRequired != "/run/reboot-required" || o.limits != kubeclient.AgentLimits {
		t.Errorf("parsed %+v", o)
	}
	for name, args := range map[string][]string{
		"no node":        {},
		"blank node":     {"--node= "},
		"bad poll":       {"--node=n1", "--reboot-required-poll=0s"},
		"unknown flag":   {"--node=n1", "--reboot=now"},
		"stray argument": {"--node=n1", "reboot"},
		"zero qps":       {"--node=n1", "--kube-api-qps=0"},
		"burst below 1":  {"--node=n1", "--kube-api-burst=-3"},
	} {
		_, fs, err := parse(args)
		if fs != nil {
			fs.SetOutput(new(strings.Builder))
		}
		if err == nil {
			t.Errorf("%s: %v accepted", name, args)
		}
	}
}

func TestREADMEListsEveryFlag(t *testing.T) {
	readme := []byte(docs.All(t, "../../.."))
	t.Setenv("NODE_NAME", "n")
	_, fs, _ := parse(nil)
	if missing := flagenv.Undocumented(fs, string(readme)); len(missing) > 0 {
		t.Errorf("README does not document %v", missing)
	}
}

// docs/reference/update-agent.md is generated from the flags of update-agent and its two
// subcommands (`make docs`) and must be current.
func TestFlagReference(t *testing.T) {
	t.Setenv("NODE_NAME", "") // a default that comes from the pod's environment
	_, agent, _ := parse(nil)
	_, fleetlock, _ := parseFleetLock(nil, new(strings.Builder))
	_, nodeConfig, _ := parseNodeConfig(nil, new(strings.Builder))
	page := "# update-agent flags\n\nGenerated from the flags' own `--help` text by `make docs` " +
		"(`TestFlagReference` fails when it is stale); [reference.md](../reference.md) says more about each. " +
		"A flag given on the command line wins over its environment variable.\n\n" +
		"## update-agent\n\n" + flagenv.Reference(agent, "UPDATE_AGENT") +
		"\n## update-agent fleetlock\n\n" + flagenv.Reference(fleetlock, "UPDATE_AGENT_FLEETLOCK") +
		"\n## update-agent node-config apply\n\nNo environment variables: every input is on the command line.\n\n" + flagenv.Reference(nodeConfig, "")
	docs.CheckGenerated(t, "../../../docs/reference/update-agent.md", page)
}
