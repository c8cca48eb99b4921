//go:build envtest

package integration

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// standInAnnouncer plays the node agents, which envtest does not run: with
// the agent's identity (so RBAC and the ledger's admission policy apply), it
// records every allocated address as announced by "node-a", as the L2 owner
// would. Without it every Service would wait for an announcement forever, and
// the migration, which hands over only once the new path announces the IP,
// would never finish. The real announcement is tested in test/e2e.
func standInAnnouncer(ctx context.Context) {
	agent, err := client.New(env.AgentConfig("node-a"), client.Options{Scheme: paasv1.NewScheme()})
	if err != nil {
		panic(err)
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		var ledger paasv1.IPList
		if err := agent.List(ctx, &ledger); err != nil {
			return
		}
		for i := range ledger.Items {
			ip := &ledger.Items[i]
			if ip.Spec.Owner == nil || len(ip.Status.AnnouncedBy) > 0 {
				continue
			}
			patch := client.MergeFrom(ip.DeepCopy())
			ip.Status.AnnouncedBy = []string{"node-a"}
			_ = agent.Status().Patch(ctx, ip, patch)
		}
	}, 250*time.Millisecond)
}
