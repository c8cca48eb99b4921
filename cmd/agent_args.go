package cmd

import (
	"fmt"
	"io"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/paas-org/vip-allocator-operator/nodeagent"
)

// checkAgentArgs parses the operator's --agent-args as the agents will: a flag
// the agent does not know, or a value it refuses, stops the operator at its
// start rather than every agent in a crash loop. It returns the agent's
// configuration they make, for tests.
func checkAgentArgs(args []string) (nodeagent.Config, error) {
	var c nodeagent.Config
	fs, raw := agentFlags(&c)
	zapOpts := zap.Options{}
	bindZapFlags(fs, &zapOpts)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("%q: not a flag", fs.Arg(0))
	}
	return c, raw.complete(&c)
}
