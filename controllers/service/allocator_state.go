package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
	"github.com/paas-org/vip-allocator-operator/internal/lbclass"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
	"github.com/paas-org/vip-allocator-operator/internal/reserved"
)

// allocatorState is the operator's in-memory allocation state: the pure allocator
// behind a mutex, rebuilt from the cluster once before anything is allocated,
// and the Services waiting for an address.
type allocatorState struct {
	mu        sync.Mutex
	alloc     *allocator.Allocator
	groupsKey string // identity of the IPGroups the allocator holds
	// protection is every IPGroup's, by name, Terminating ones included: the
	// addresses each keeps for their Services (kept.go).
	protection map[string]groupProtection
	rebuilt    atomic.Bool
	pending    map[types.NamespacedName]struct{}

	// reservedStale is set until the reserved addresses were read, and again
	// when reading them failed: the next allocation reads them first.
	reservedStale atomic.Bool
	// conflicted are the keys holding reserved addresses, as last computed.
	conflicted map[string]map[netip.Addr]allocator.Reservation
	// claimed are the keys holding addresses Nodes claim, as last computed.
	claimed map[string]bool

	// Writes the informers have not shown yet. A reconcile that runs on a cache
	// older than its own last write must not repeat it (a second status patch
	// and a duplicate Event, or a create that fails with AlreadyExists).
	inFlight struct {
		sync.Mutex
		statusFrom map[types.NamespacedName]string // resourceVersion our last status patch was computed from
		// ledger objects created or joined, not yet in the cache, each with the
		// resourceVersion of a write that needs no reconcile when it shows up.
		ledger map[ledgerWrite]string
	}
}

func newAllocatorState() *allocatorState {
	a := &allocatorState{alloc: allocator.New(), pending: map[types.NamespacedName]struct{}{}}
	a.inFlight.statusFrom = map[types.NamespacedName]string{}
	a.inFlight.ledger = map[ledgerWrite]string{}
	a.reservedStale.Store(true)
	return a
}

// statusPatched records that key's status was patched from resourceVersion rv.
func (a *allocatorState) statusPatched(key types.NamespacedName, rv string) {
	a.inFlight.Lock()
	defer a.inFlight.Unlock()
	a.inFlight.statusFrom[key] = rv
}

// staleStatus reports whether the cached Service (at rv) predates our last
// status patch; it forgets the patch once the cache has moved on.
func (a *allocatorState) staleStatus(key types.NamespacedName, rv string) bool {
	a.inFlight.Lock()
	defer a.inFlight.Unlock()
	from, ok := a.inFlight.statusFrom[key]
	if ok && from != rv {
		delete(a.inFlight.statusFrom, key)
	}
	return ok && from == rv
}

// ledgerWrite is a ledger object written for one holder.
type ledgerWrite struct {
	name  string
	owner types.UID
}

// ledgerCreated records a write to ledger object name for owner. settled is
// the resourceVersion the write returned when the reconcile that made it did
// all there is to do with it ("" when the object needs another look once the
// cache shows it).
func (a *allocatorState) ledgerCreated(name string, owner types.UID, settled string) {
	a.inFlight.Lock()
	defer a.inFlight.Unlock()
	a.inFlight.ledger[ledgerWrite{name, owner}] = settled
}

// ledgerSeen forgets the writes to a ledger object for the holders it shows:
// the cache has them now. It returns the holders for whom the object is
// exactly their settled write: its event tells them nothing new, so a
// reconcile for it would only repeat the one that wrote it (a third of the
// operator's reconciles of a new Service).
func (a *allocatorState) ledgerSeen(ip *paasv1.IP) (settled []types.NamespacedName) {
	a.inFlight.Lock()
	defer a.inFlight.Unlock()
	for _, o := range ledger.Holders(ip) {
		w := ledgerWrite{ip.Name, o.UID}
		if rv, ok := a.inFlight.ledger[w]; ok && rv != "" && rv == ip.ResourceVersion {
			settled = append(settled, types.NamespacedName{Namespace: o.Namespace, Name: o.Name})
		}
		delete(a.inFlight.ledger, w)
	}
	return settled
}

// ledgerInFlight reports whether we created or joined ledger object name for
// owner and the cache has not shown it yet.
func (a *allocatorState) ledgerInFlight(name string, owner types.UID) bool {
	a.inFlight.Lock()
	defer a.inFlight.Unlock()
	_, ok := a.inFlight.ledger[ledgerWrite{name, owner}]
	return ok
}

// forget drops what is known about key's writes: the Service is gone.
func (a *allocatorState) forget(key types.NamespacedName) {
	a.inFlight.Lock()
	defer a.inFlight.Unlock()
	delete(a.inFlight.statusFrom, key)
}

// syncGroups hands the allocator the current IPGroups when they changed.
// Callers hold a.mu.
func (a *allocatorState) syncGroups(ctx context.Context, c client.Reader) error {
	// Every allocation asks; the groups are only read here, so the cache's
	// own objects serve (copying them all on every allocation is garbage for nothing).
	var list paasv1.IPGroupList
	if err := c.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list IPGroups: %w", err)
	}
	var ids []string
	for _, g := range list.Items {
		ids = append(ids, fmt.Sprintf("%s/%s/%d/%t/%t", g.Name, g.UID, g.Generation, g.DeletionTimestamp.IsZero(), g.ReleasesAddresses()))
	}
	slices.Sort(ids)
	key := strings.Join(ids, ",")
	if key == a.groupsKey {
		return nil
	}
	var groups []*allocator.Group
	protection := map[string]groupProtection{}
	for i := range list.Items {
		item := &list.Items[i]
		p := groupProtection{deleting: !item.DeletionTimestamp.IsZero(), released: item.ReleasesAddresses()}
		g, err := k8salloc.Group(item)
		if err != nil {
			// The IPGroup controller reports it on the group; it hands out nothing.
			logf.FromContext(ctx).Info("ignoring invalid IPGroup", "ipgroup", item.Name, "error", err.Error())
			protection[item.Name] = p
			continue
		}
		p.group = g
		protection[item.Name] = p
		if !p.deleting { // a Terminating group hands out nothing, and keeps what it protects
			groups = append(groups, g)
		}
	}
	a.alloc.SetGroups(groups)
	a.protection = protection
	a.groupsKey = key
	return nil
}

// rebuild imports every address the cluster already holds, before the first
// allocation: Service statuses first (they are what clients use, so a Service
// keeps its address), oldest Service first; then the ledger (which covers a
// crash between ledger create and status patch); then legacy VirtualIPs. One
// exception to "status first": a status address whose ledger object names
// another live Service (by uid) is not imported for the status holder: the
// ledger is the authority (anyone with services/status could have written
// the status), and the status holder is given another address. It also reads
// the reserved addresses. It runs once; later calls return at once.
func (a *allocatorState) rebuild(ctx context.Context, c client.Reader, ownClassOnly bool, reserved *reserved.Source) error {
	if a.rebuilt.Load() {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.rebuilt.Load() {
		return nil
	}
	log := logf.FromContext(ctx)
	if err := a.syncGroups(ctx, c); err != nil {
		return err
	}
	var services corev1.ServiceList
	if err := c.List(ctx, &services); err != nil {
		return fmt.Errorf("rebuild: list Services: %w", err)
	}
	slices.SortFunc(services.Items, func(x, y corev1.Service) int {
		return x.CreationTimestamp.Compare(y.CreationTimestamp.Time)
	})
	var ips paasv1.IPList
	if err := c.List(ctx, &ips); err != nil {
		return fmt.Errorf("rebuild: list IPs: %w", err)
	}
	imported := a.importStatuses(log, services.Items, ledger.LiveHolderKeys(services.Items, ips.Items), ownClassOnly)
	a.importLedger(log, ips.Items)
	a.importInUseOnLAN(ips.Items)
	var vips paasv1.VirtualIPList
	if err := c.List(ctx, &vips); err != nil {
		return fmt.Errorf("rebuild: list VirtualIPs: %w", err)
	}
	a.importLegacy(log, vips.Items)
	if err := a.syncReserved(ctx, c, reserved); err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	a.conflicted, a.claimed = a.alloc.Conflicts(), claimedKeys(a.alloc)
	log.Info("allocator rebuilt", "services", imported, "ledger", len(ips.Items), "virtualIPs", len(vips.Items), "holdingReserved", len(a.conflicted))
	a.rebuilt.Store(true)
	return nil
}

// importStatuses gives the allocator the addresses the Services' statuses
// show (the oldest Service first), but none the ledger gives another live
// Service, and returns how many Services it read. The caller holds a.mu.
func (a *allocatorState) importStatuses(log logr.Logger, services []corev1.Service, liveHolders map[netip.Addr][]string, ownClassOnly bool) int {
	// Before any address is imported: whether a Service may share decides
	// whether a second holder of an address is imported at all.
	for i := range services {
		svc := &services[i]
		if sharing, err := k8salloc.SharingOf(svc); err == nil && lbclass.Handles(svc, ownClassOnly) {
			a.alloc.SetSharing(client.ObjectKeyFromObject(svc).String(), sharing)
		}
	}
	imported := 0
	for i := range services {
		svc := &services[i]
		if !lbclass.Handles(svc, ownClassOnly) {
			continue
		}
		key := client.ObjectKeyFromObject(svc).String()
		var addrs []netip.Addr
		for _, addr := range k8salloc.IngressAddrs(svc) {
			if holder, ok := liveHolders[addr]; ok && !slices.Contains(holder, key) {
				log.Info("rebuild: the status shows an address the ledger gives another live Service; the ledger wins", "service", key, "address", addr, "ledgerHolder", holder)
				continue
			}
			addrs = append(addrs, addr)
		}
		if err := a.alloc.Assign(key, addrs...); err != nil {
			// Two Services claim one address: the older keeps it, the other is
			// given a new one by its reconcile.
			log.Error(err, "rebuild: address claimed twice", "service", key)
		}
		imported++
	}
	return imported
}

// importLedger gives the allocator the ledger's addresses and their holders.
// A conflict means a status said otherwise for a ledger object whose holder
// is gone, and the status wins; each is logged and counted, since it may
// also be a ledger someone edited by hand. The caller holds a.mu.
func (a *allocatorState) importLedger(log logr.Logger, ips []paasv1.IP) {
	for i := range ips {
		if ledger.IsLANRecord(&ips[i]) {
			continue // held by no one: importInUseOnLAN marks it
		}
		addr, ok := ips[i].Addr()
		if !ok {
			continue
		}
		// The owner first, then the other holders of a shared address, each once.
		keys := append([]string{ledger.OwnerKey(&ips[i])}, ledger.HolderKeys(&ips[i])...)
		for j, key := range keys {
			if slices.Contains(keys[:j], key) {
				continue
			}
			if err := a.alloc.Assign(key, addr); err != nil {
				importConflicts.WithLabelValues(importSourceLedger).Inc()
				log.Error(err, "rebuild: the ledger gives an address another holder has; not imported", "ip", ips[i].Name, "holder", key)
			}
		}
	}
}

// importLegacy gives the allocator the addresses of legacy VirtualIPs not yet
// migrated; a conflict is logged and counted as importLedger's are. The
// caller holds a.mu.
func (a *allocatorState) importLegacy(log logr.Logger, vips []paasv1.VirtualIP) {
	for _, v := range vips {
		addr, ok := v.Addr()
		if !ok || v.Migrated() {
			continue
		}
		key := ledger.LegacyKey(v.Namespace, v.Name)
		if err := a.alloc.Assign(key, addr); err != nil {
			importConflicts.WithLabelValues(importSourceVirtualIP).Inc()
			log.Error(err, "rebuild: a legacy VirtualIP holds an address another holder has; not imported", "virtualIP", v.Namespace+"/"+v.Name)
		}
	}
}

// ReadyCheck is a readiness check: not ready until the allocator is rebuilt.
// With leader election, a standby replica is ready (it rebuilds when elected):
// otherwise a one-replica rolling update would wait forever for the new pod.
func (a *allocatorState) ReadyCheck(leaderElection bool, elected <-chan struct{}) func(*http.Request) error {
	return func(*http.Request) error {
		if leaderElection {
			select {
			case <-elected:
			default:
				return nil
			}
		}
		if !a.rebuilt.Load() {
			return errors.New("allocator not rebuilt yet")
		}
		return nil
	}
}
