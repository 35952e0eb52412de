package protocol

// The node protocol's versions (AgentProtocol): "1" is FLUO's, which an agent that announces none
// speaks; "2" adds Slipway's own agent keys (boot-id, reboot-error, agent-protocol). An operator admits
// nodes whose agent speaks one of AgentProtocols: the current and the previous one, so either the
// operator or the agents can be upgraded first.
const (
	AgentProtocolFLUO    = "1"
	AgentProtocolCurrent = "2"
)

// AgentProtocols are the versions this operator speaks.
var AgentProtocols = []string{AgentProtocolFLUO, AgentProtocolCurrent}

// AgentProtocolOf is the protocol version n's agent announces (AgentProtocolFLUO when none).
func AgentProtocolOf(annotations map[string]string) string {
	if v, ok := annotations[AgentProtocol]; ok {
		return v
	}
	return AgentProtocolFLUO
}
