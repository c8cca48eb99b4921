package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// Reporting an adopted address programmed. While its ledger object awaits the data path
// (spec.awaitingDataPath), kube-proxy still forwards the address and the operator writes ipMode
// Proxy, which makes it let go, only once the nodes announcing the address say their planes
// carry it (paasv1.IP.ProxyReady): each such node adds itself, and only itself, to
// status.programmedBy (config/admission/agent_status_entries.yaml holds it to that), after a
// sync that wrote its rules.

// reportsProgrammed says whether node must add itself to ip's programmedBy now that its planes
// carry the address: the address awaits the data path, node has not said so yet, and its report
// counts (node announces the address; with announce.mode None, where no node does, any node's).
func reportsProgrammed(ip *paasv1.IP, node string, mode paasv1.AnnounceMode) bool {
	if !ip.Spec.AwaitingDataPath || slices.Contains(ip.Status.ProgrammedBy, node) {
		return false
	}
	return mode == paasv1.AnnounceNone || slices.Contains(ip.Status.AnnouncedBy, node)
}

// ReportProgrammed records this node in programmedBy of each of addrs (carried by the planes,
// awaiting the data path) whose report counts. A write that meets another node's (optimistic
// lock) fails, and the sync that asked comes back.
func (r *Reporter) ReportProgrammed(ctx context.Context, addrs []netip.Addr) error {
	var errs []error
	for _, addr := range addrs {
		ip := &paasv1.IP{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: paasv1.IPObjectName(addr)}, ip); err != nil {
			errs = append(errs, client.IgnoreNotFound(err))
			continue
		}
		g := &paasv1.IPGroup{} // not found: L2, as for a group without a mode
		if err := r.Client.Get(ctx, client.ObjectKey{Name: ip.Labels[paasv1.IPGroupLabel]}, g); client.IgnoreNotFound(err) != nil {
			errs = append(errs, err)
			continue
		}
		if !reportsProgrammed(ip, r.NodeName, election.ModeOf(g)) {
			continue
		}
		patch := client.MergeFromWithOptions(ip.DeepCopy(), client.MergeFromWithOptimisticLock{})
		ip.Status.ProgrammedBy = append(ip.Status.ProgrammedBy, r.NodeName)
		if err := r.Client.Status().Patch(ctx, ip, patch, agentFieldOwner); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("record %s as programmed by %s: %w", ip.Name, r.NodeName, err))
		}
	}
	return errors.Join(errs...)
}

// reportProgrammed reports the addresses awaiting the data path that the planes carry since
// this sync (nothing without a Reporter).
func (s *Syncer) reportProgrammed(ctx context.Context) error {
	if s.Reporter == nil {
		return nil
	}
	return s.Reporter.ReportProgrammed(ctx, s.state.awaitingCarried())
}
