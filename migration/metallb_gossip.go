package migration

import (
	"fmt"
	"slices"
	"strings"
)

// MetalLB's speakers and the agents both run a hashicorp/memberlist gossip,
// both bound to the node's address, and both on memberlist's usual port
// unless told otherwise. On a node running both, the one that starts second
// cannot bind and exits; the documented order installs the agents while the
// speakers still run, so the plan compares the two ports and apply refuses to
// start a switch the agents could not carry.

// speakerGossip is the memberlist one MetalLB speaker DaemonSet starts, read
// from its pod template (metallbSpeakerGossip).
type speakerGossip struct {
	DaemonSet Object
	// Off says why the speaker starts no memberlist, or cannot clash with
	// the agents; "" when it does start one.
	Off string
	// Port the speaker binds; 0 when it cannot be told from the DaemonSet,
	// Unknown says why.
	Port    int
	Unknown string
}

// agentGossip is the agents' gossip port and where it was read from.
type agentGossip struct {
	// Port is 0 when the DaemonSet's value does not parse (the agents then
	// exit on their flags, and From says so).
	Port int
	From string
}

// gossipCheck compares the speakers' gossip ports with the agents': lines
// say what was compared, for the plan; problems name each clash, both sides
// and the fix. It is pure.
func gossipCheck(namespace string, speakers []speakerGossip, agent agentGossip) (lines, problems []string) {
	if len(speakers) == 0 {
		return []string{fmt.Sprintf("no DaemonSet of namespace %s labelled as MetalLB's speaker (component=speaker and app=metallb, or app.kubernetes.io/component=speaker and app.kubernetes.io/name=metallb): the gossip ports are not compared; the agents gossip on port %d (%s)", namespace, agent.Port, agent.From)}, nil
	}
	for _, s := range speakers {
		switch {
		case s.Off != "":
			lines = append(lines, fmt.Sprintf("%s: %s; no clash with the agents' gossip on port %d (%s)", s.DaemonSet, s.Off, agent.Port, agent.From))
		case s.Port == 0:
			lines = append(lines, fmt.Sprintf("%s: memberlist on, its port cannot be told (%s): make sure it is not %d, the agents' (%s)", s.DaemonSet, s.Unknown, agent.Port, agent.From))
		case s.Port == agent.Port:
			lines = append(lines, fmt.Sprintf("%s: memberlist on port %d, the agents' too (%s): clash (see problems)", s.DaemonSet, s.Port, agent.From))
			problems = append(problems, fmt.Sprintf("%s (MetalLB's speakers) and the agents (%s) both gossip on port %d of the node's address: on a node running both, the one that starts second exits (bind: address already in use) and the agents cannot take over there; apply refuses and writes nothing. Set the operator's --agent-args=--memberlist-port=%d, or MetalLB's METALLB_ML_BIND_PORT (Helm: speaker.memberlist.mlBindPort), then plan again",
				s.DaemonSet, agent.From, s.Port, freeGossipPort(agent.Port, speakers)))
		default:
			lines = append(lines, fmt.Sprintf("%s: memberlist on port %d, the agents' on %d (%s): no clash", s.DaemonSet, s.Port, agent.Port, agent.From))
		}
	}
	return lines, problems
}

// freeGossipPort is the first port above from that no speaker gossips on:
// the port to suggest for the agents.
func freeGossipPort(from int, speakers []speakerGossip) int {
	p := from + 1
	for slices.ContainsFunc(speakers, func(s speakerGossip) bool { return s.Off == "" && s.Port == p }) {
		p++
	}
	return p
}

// flagValue is the value Go's flag package gives flag name from args
// ("-name=v", "--name=v", "-name v", "--name v"; the last one wins); ok is
// false when args do not set it.
func flagValue(args []string, name string) (value string, ok bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		bare := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if bare == a {
			continue
		}
		n, v, hasValue := strings.Cut(bare, "=")
		if n != name {
			continue
		}
		if !hasValue && i+1 < len(args) {
			i++
			v = args[i]
		}
		value, ok = v, true
	}
	return value, ok
}
