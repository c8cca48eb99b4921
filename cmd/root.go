// Package cmd parses the vip-allocator command line and starts the chosen subcommand.
package cmd

import (
	"errors"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/paas-org/vip-allocator-operator/internal/lazylog"
)

const usage = `usage: vip-allocator <command> [flags]

commands:
  operator               run the operator (IP allocation for LoadBalancer Services)
  agent                  run the node agent (nftables or iptables from VIP:port to ready endpoints)
  agent cleanup          remove every rule, chain and table the agent ever wrote on this node
  migrate plan           for every legacy VirtualIP, what its migration will do and what blocks
                         it, and what the upgrade of the original operator's installation will
                         do (dry run)
  migrate all            mark every legacy VirtualIP that can migrate with virtualips.paas.org/migrate
  migrate upgrade        remove what the original operator left that would race or block this one
  migrate metallb plan   what MetalLB's pools, advertisements and peers become, and the address
                         each Service keeps (dry run)
  migrate metallb apply  create the IPGroups and BGPPeers the plan shows
  explain                why an address answers or not: svc/NAME, ip ADDRESS, ipgroup NAME or
                         node NAME, step by step (also "kubectl vip explain" through a
                         kubectl-vip link to this binary)

Run "vip-allocator <command> -h" for the flags of a command.`

// Run runs the subcommand named by args[0].
func Run(args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "operator":
		return runOperator(args[1:])
	case "agent":
		return runAgent(args[1:])
	case "migrate":
		return runMigrate(args[1:])
	case "explain":
		return runExplain(args[1:])
	case "-h", "--help", "help":
		fmt.Println(usage)
		return nil
	default:
		return fmt.Errorf("unknown command %q\n%s", args[0], usage)
	}
}

// setLogger makes the logger of opts everyone's, its WithValues deferred to
// the lines written (internal/lazylog: every reconcile adds values to a logger
// that almost never writes).
func setLogger(opts *zap.Options) {
	ctrl.SetLogger(lazylog.Wrap(zap.New(zap.UseFlagOptions(opts))))
}
