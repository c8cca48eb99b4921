package cmd

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestAgentArgsCarryTheProbe: the probe before an address's first
// announcement is tuned on the agents the operator deploys through its
// --agent-args, which reach the DaemonSet as given and parse as the agent
// parses them; a flag the agent does not know, or a value it refuses, stops
// the operator instead of every agent.
func TestAgentArgsCarryTheProbe(t *testing.T) {
	operator := func(agentArgs string) (*OperatorOptions, error) {
		fs := pflag.NewFlagSet("operator", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var o OperatorOptions
		raw := operatorFlags(fs, &o)
		if err := fs.Parse([]string{"--agent-args=" + agentArgs}); err != nil {
			return nil, err
		}
		return &o, raw.complete(&o)
	}
	args := "--new-address-probes=5 --new-address-probe-interval=100ms --new-address-recheck=1m"
	o, err := operator(args)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Agent.ExtraArgs, strings.Fields(args)) {
		t.Errorf("the DaemonSet's extra args %v, want %v", o.Agent.ExtraArgs, strings.Fields(args))
	}
	c, err := checkAgentArgs(o.Agent.ExtraArgs)
	if err != nil || c.Probe.Tries != 5 || c.Probe.Interval != 100*time.Millisecond || c.Probe.Recheck != time.Minute {
		t.Errorf("the agent reads %+v (%v), want 5 probes 100ms apart, rechecked every minute", c.Probe, err)
	}
	for _, bad := range []struct{ args, want string }{
		{"--new-address-probes=-1", "--new-address-probes -1"},
		{"--new-address-probes=three", "invalid argument"},
		{"--new-address-probe-interval=soon", "invalid argument"},
		{"--new-adress-probes=5", "unknown flag"},
		{"--failover-history=0", "--failover-history 0"},
	} {
		if _, err := operator(bad.args); err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), "--agent-args") {
			t.Errorf("--agent-args=%s: %v, want an error naming --agent-args and %q", bad.args, err, bad.want)
		}
	}
}
