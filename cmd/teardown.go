package cmd

import (
	"fmt"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paas-org/vip-allocator-operator/nodeagent"
)

// teardownIfUninstalled removes the node's rules when the agent stops because
// it is being uninstalled, and keeps them on a restart (nodeagent/teardown.go).
// It uses a fresh client: the manager and its cache have stopped.
//
// first runs before the rules go: the BGP sessions a restart would have left
// to graceful restart are closed, so no router keeps sending to rules that
// are about to disappear.
func teardownIfUninstalled(cfg *rest.Config, daemonSet, node string, first func()) error {
	key, err := nodeagent.ParseDaemonSet(daemonSet)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return fmt.Errorf("teardown: %w", err)
	}
	verdict, err := nodeagent.TeardownIfUninstalled(c, key, node, func() error { first(); return runAgentCleanup(nil) })
	ctrl.Log.Info("agent stopping", "removeRules", verdict.Uninstall, "why", verdict.Why)
	return err
}
