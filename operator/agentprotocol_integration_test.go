package operator_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
)

// Slipway upgraded in the wrong order: a node whose agent speaks a node protocol this operator does
// not is held with blocked-by agent-version, never guessed at; once its agent speaks one the operator
// knows (here: rolled back) it goes. Slipway's own agent announces the current protocol.
func TestAgentProtocolHeld(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	sn := simNodes(t, "proto", 1)[0]
	if v := getNode(t, sn.Name).Annotations[protocol.AgentProtocol]; v != protocol.AgentProtocolCurrent {
		t.Fatalf("the agent announces protocol %q, want %q", v, protocol.AgentProtocolCurrent)
	}
	readyNode(t, "proto-next", nil, map[string]string{protocol.RebootNeeded: protocol.True, protocol.AgentProtocol: "3"})
	startOperator(t, opOptions{max: "2"})
	// The node with the current protocol goes through its whole cycle meanwhile.
	if err := sn.SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	waitNode(t, "proto-next", 30*time.Second, "held by agent-version", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], `agent-version: its agent speaks node protocol "3"; this operator speaks 1 and 2`)
	})
	waitNode(t, sn.Name, 60*time.Second, "the node of the current protocol finished", finished)
	if n := getNode(t, "proto-next"); inCycle(n) {
		t.Fatalf("admitted while its agent speaks an unknown protocol: %v", n.Annotations)
	}
	annotate(t, "proto-next", map[string]*string{protocol.AgentProtocol: strPtr(protocol.AgentProtocolCurrent)})
	waitNode(t, "proto-next", 30*time.Second, "admitted once its agent speaks a known protocol", func(n *corev1.Node) bool {
		return n.Annotations[protocol.CycleStarted] != ""
	})
}

func strPtr(s string) *string { return &s }
