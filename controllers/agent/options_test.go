package agent

import (
	"slices"
	"strings"
	"testing"

	"github.com/paas-org/vip-allocator-operator/internal/election"
)

func TestParseAgentArgs(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"", nil, ""},
		{"--dataplane=iptables  --liveness-timers=lan", []string{"--dataplane=iptables", "--liveness-timers=lan"}, ""},
		{"--dataplane iptables", nil, `"iptables": want flags`},
		{"--node-name=x", nil, "--node-name is set by the operator"},
		{"--daemonset=ns/ds", nil, "--daemonset is set by the operator"},
	}
	for _, tt := range tests {
		got, err := ParseArgs(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseArgs(%q) error %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ParseArgs(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestOnCordonReachesTheAgents(t *testing.T) {
	if _, err := ParseArgs("--on-cordon=keep"); err == nil {
		t.Error("--on-cordon in --agent-args accepted: the operator and the agents could disagree")
	}
	base := Options{Namespace: "ns", ExtraArgs: []string{"--dataplane=iptables"}}
	if got := agentArgs(base); slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, "--on-cordon") }) {
		t.Errorf("the default policy adds a flag (an upgrade would restart every agent): %v", got)
	}
	base.OnCordon = election.OnCordonKeep
	got := agentArgs(base)
	if !slices.Contains(got, "--on-cordon=keep") || got[len(got)-1] != "--dataplane=iptables" {
		t.Errorf("args %v", got)
	}
}
