package nodeagent

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/internal/lbclass"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
	"github.com/paas-org/vip-allocator-operator/nodeagent/l2"
)

// Liveness is the agents' view of each other (package membership): which
// agents are alive, and which of those are handing their VIPs over.
type Liveness interface {
	// Alive maps the node name of every alive agent, this one included, to
	// whether it is draining.
	Alive() map[string]bool
	// Changed signals (coalesced) that Alive may return something new.
	Changed() <-chan struct{}
}

// Announcer makes this node answer ARP (IPv4) and NDP (IPv6) for the L2 VIPs
// it owns. Every agent
// computes the same owner for every VIP (package election) from the same
// inputs: the alive agents, the Node objects, the IPGroups and the Services'
// endpoints.
type Announcer struct {
	Client       client.Client
	Recorder     record.EventRecorder
	NodeName     string
	OwnClassOnly bool
	Liveness     Liveness
	Speaker      *l2.Speaker
	// Settled reports whether this agent's view of the others is worth
	// acting on; until then it announces nothing (nil: at once). Right after
	// start an agent may know only itself and would claim every VIP.
	Settled func() bool
	// HandoverDelay is how long a VIP is still answered for after this node
	// lost it while alive: the new owner's gratuitous ARP comes first, then we
	// go quiet, so a planned move drops nothing.
	HandoverDelay time.Duration

	// BGP advertises the VIPs of BGP-mode groups (nil: this agent does not
	// speak BGP).
	BGP *BGPAnnouncer

	// Handoff programs the data path to send the mid-stream TCP segments of the
	// VIPs this node took over to their previous owners (nil: not at all).
	Handoff func(dataplane.Handoffs) error

	mu        sync.Mutex
	owned     map[netip.Addr]string   // VIP → interface, as last computed
	releasing map[netip.Addr]handover // VIPs lost, still answered for a while
	// handoffFrom names the node each VIP was taken over from; only Reconcile
	// (one worker) uses it.
	handoffFrom map[netip.Addr]string
}

type handover struct {
	iface string
	until time.Time
}

// EventARPConflict is the reason of the Warning Event raised when another MAC
// claims a VIP this node announces, by ARP or, for IPv6, by a Neighbor
// Advertisement (one reason for both: alerts match on it).
const EventARPConflict = "ARPConflict"

// announceRequest is the Announcer's only work item, like the data plane's.
var announceRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: "announce"}}

// +kubebuilder:rbac:groups=paas.org,resources=ipgroups;ips;virtualips,verbs=get;list;watch
// +kubebuilder:rbac:groups=paas.org,resources=ips/status,verbs=get;patch;update
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get,resourceNames=vip-allocator-memberlist,namespace=vip-allocator-operator

func (a *Announcer) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	if a.Settled != nil && !a.Settled() {
		return reconcile.Result{RequeueAfter: 200 * time.Millisecond}, nil
	}
	all, err := a.candidacies(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	nodes, known, err := a.aliveNodes(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	vips, bgpVIPs := map[netip.Addr]election.Candidacy{}, map[netip.Addr]vipCandidacy{}
	for vip, c := range all {
		if election.ModeOf(c.group) == paasv1.AnnounceBGP {
			bgpVIPs[vip] = c
		} else {
			vips[vip] = c.Candidacy
		}
	}
	var bgpErr error
	if a.BGP != nil {
		// BGP first: a route needs no election among the agents, and a
		// cordoned node must withdraw at once. A BGP failure must not hold
		// back layer 2: it is returned (and retried) once L2 is done.
		bgpErr = a.advertise(ctx, bgpVIPs, nodes)
	}
	owned := map[netip.Addr]string{}
	if a.handoffFrom == nil {
		a.handoffFrom = map[netip.Addr]string{}
	}
	if !a.inMajority(nodes, known) {
		// Cut off from most agents (our link is down, or a partition): the
		// others elect owners without us, so we must go quiet rather than
		// answer for every VIP at once.
		vips = nil
	}
	for vip, c := range vips {
		if node, iface, ok := election.Owner(vip, c, nodes); ok && node == a.NodeName {
			owned[vip] = iface
		}
	}
	a.logChanges(ctx, owned, nodes, known)
	answer, next := a.withHandovers(owned, time.Now())
	// Open connections are handed back to the previous owner before the first
	// gratuitous ARP moves their clients here, and for as long as this node
	// still answers for the VIP: clients move on only when the next owner's
	// gratuitous ARP reaches them.
	if a.Handoff != nil {
		if err := a.handOff(ctx, owned, answer, nodes); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "handing open connections back to previous owners failed")
		}
	}
	vipsAnnounced.Set(float64(len(answer)))
	agentsAlive.Set(float64(len(nodes)))
	releasing := map[netip.Addr]string{}
	for vip, iface := range answer {
		if _, ours := owned[vip]; !ours {
			releasing[vip] = iface
		}
	}
	if err := a.Speaker.SetAnswering(owned, releasing); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "answering ARP/NDP on some interfaces failed")
	}
	for vip := range owned {
		if err := a.claim(ctx, vip); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{RequeueAfter: next}, bgpErr
}

// handOff programs the connection handoffs of the VIPs answered for: it learns
// from the ledger which node announced each owned VIP before this one took it
// over, and keeps that through the hand-over of a VIP this node lost.
func (a *Announcer) handOff(ctx context.Context, owned, answered map[netip.Addr]string, alive []election.Node) error {
	for vip := range owned {
		var ip paasv1.IP
		if err := a.Client.Get(ctx, client.ObjectKey{Name: paasv1.IPObjectName(vip)}, &ip); err != nil {
			continue // not in the ledger (yet): nobody announced it before
		}
		for _, n := range ip.Status.AnnouncedBy {
			if n != a.NodeName {
				a.handoffFrom[vip] = n
				break
			}
		}
	}
	handoffs := handoffTargets(answered, a.handoffFrom, alive)
	for vip := range a.handoffFrom {
		if _, ok := handoffs[vip]; !ok {
			delete(a.handoffFrom, vip) // lost the VIP, or its previous owner died
		}
	}
	handoffsActive.Set(float64(len(handoffs)))
	return a.Handoff(handoffs)
}

// handoffTargets maps each VIP answered for that this node took over from a node still alive to that
// node's address on the VIP's subnet, where its open connections still are (see
// dataplane.Handoffs). A VIP whose previous owner is dead, or has no address on the subnet,
// gets none: its connections are gone anyway.
func handoffTargets(answered map[netip.Addr]string, from map[netip.Addr]string, alive []election.Node) dataplane.Handoffs {
	out := dataplane.Handoffs{}
	for vip, prev := range from {
		if _, ours := answered[vip]; !ours {
			continue
		}
		i := slices.IndexFunc(alive, func(n election.Node) bool { return n.Name == prev })
		if i < 0 {
			continue
		}
		for _, ifc := range alive[i].Interfaces {
			if ifc.Prefix.Contains(vip) && ifc.Prefix.Addr() != vip {
				out[vip] = ifc.Prefix.Addr()
				break
			}
		}
	}
	return out
}

// logChanges logs the VIPs this node takes and gives up, with the view it
// decided from.
func (a *Announcer) logChanges(ctx context.Context, owned map[netip.Addr]string, alive []election.Node, known int) {
	a.mu.Lock()
	prev := a.owned
	a.mu.Unlock()
	var gained, lost []string
	for vip := range owned {
		if _, had := prev[vip]; !had {
			gained = append(gained, vip.String())
		}
	}
	for vip := range prev {
		if _, has := owned[vip]; !has {
			lost = append(lost, vip.String())
		}
	}
	if len(gained) == 0 && len(lost) == 0 {
		return
	}
	ownershipChanges.WithLabelValues("taken").Add(float64(len(gained)))
	ownershipChanges.WithLabelValues("handed-over").Add(float64(len(lost)))
	names := make([]string, 0, len(alive))
	for _, n := range alive {
		names = append(names, n.Name)
	}
	ctrl.LoggerFrom(ctx).Info("ownership changed", "taken", gained, "handed over", lost, "alive", names, "agents", known)
}

// withHandovers adds to owned the VIPs this node lost less than HandoverDelay
// ago, and says when to look again to drop them.
func (a *Announcer) withHandovers(owned map[netip.Addr]string, now time.Time) (map[netip.Addr]string, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.releasing == nil {
		a.releasing = map[netip.Addr]handover{}
	}
	for vip, iface := range a.owned {
		if _, still := owned[vip]; !still {
			if _, already := a.releasing[vip]; !already {
				a.releasing[vip] = handover{iface: iface, until: now.Add(a.HandoverDelay)}
			}
		}
	}
	a.owned = owned
	answer := make(map[netip.Addr]string, len(owned))
	var next time.Duration
	for vip, h := range a.releasing {
		_, ownedAgain := owned[vip]
		if ownedAgain || !now.Before(h.until) {
			delete(a.releasing, vip)
			continue
		}
		answer[vip] = h.iface
		if left := h.until.Sub(now); next == 0 || left < next {
			next = left
		}
	}
	for vip, iface := range owned {
		answer[vip] = iface
	}
	return answer, next
}

// vipCandidacy is what a VIP asks of the nodes that carry it, and its group.
type vipCandidacy struct {
	election.Candidacy
	group *paasv1.IPGroup
}

// candidacies maps every VIP this agent's cluster announces (L2 or BGP) to
// what it asks of the nodes that carry it.
func (a *Announcer) candidacies(ctx context.Context) (map[netip.Addr]vipCandidacy, error) {
	var services corev1.ServiceList
	if err := a.Client.List(ctx, &services); err != nil {
		return nil, fmt.Errorf("list Services: %w", err)
	}
	var groups paasv1.IPGroupList
	if err := a.Client.List(ctx, &groups); err != nil {
		return nil, fmt.Errorf("list IPGroups: %w", err)
	}
	byName := map[string]*paasv1.IPGroup{}
	for i := range groups.Items {
		byName[groups.Items[i].Name] = &groups.Items[i]
	}
	out := map[netip.Addr]vipCandidacy{}
	for i := range services.Items {
		svc := &services.Items[i]
		if !lbclass.Handles(svc, a.OwnClassOnly) {
			continue
		}
		var local map[string]bool
		for _, in := range svc.Status.LoadBalancer.Ingress {
			vip, err := netip.ParseAddr(in.IP)
			if err != nil {
				continue
			}
			vip = vip.Unmap()
			group, err := a.groupOf(ctx, vip, svc, byName)
			if err != nil || group == nil {
				continue // not (yet) in the ledger: not ours to announce
			}
			c, ok := election.CandidacyOf(group)
			if !ok {
				continue
			}
			if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
				if local == nil {
					if local, err = a.endpointNodes(ctx, svc); err != nil {
						return nil, err
					}
				}
				c.LocalNodes = local
			}
			out[vip] = vipCandidacy{Candidacy: c, group: group}
		}
	}
	return out, nil
}

// groupOf is the IPGroup vip was allocated from, per the ledger, if the ledger
// gives it to svc.
func (a *Announcer) groupOf(ctx context.Context, vip netip.Addr, svc *corev1.Service, groups map[string]*paasv1.IPGroup) (*paasv1.IPGroup, error) {
	var ip paasv1.IP
	if err := a.Client.Get(ctx, client.ObjectKey{Name: paasv1.IPObjectName(vip)}, &ip); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if ip.Spec.Owner != nil && ip.Spec.Owner.UID != svc.UID {
		return nil, nil
	}
	return groups[ip.Labels[paasv1.IPGroupLabel]], nil
}

// endpointNodes are the nodes with a ready endpoint of svc.
func (a *Announcer) endpointNodes(ctx context.Context, svc *corev1.Service) (map[string]bool, error) {
	var slices discoveryv1.EndpointSliceList
	if err := a.Client.List(ctx, &slices, client.InNamespace(svc.Namespace), client.MatchingFields{serviceNameIndex: svc.Name}); err != nil {
		return nil, fmt.Errorf("list EndpointSlices of %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	out := map[string]bool{}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if (e.Conditions.Ready == nil || *e.Conditions.Ready) && e.NodeName != nil {
				out[*e.NodeName] = true
			}
		}
	}
	return out, nil
}

// inMajority reports whether this agent sees at least half of the agents the
// cluster knows (Nodes whose agent published its interfaces) alive. Half, not
// more: in a two-node cluster a lone survivor must still answer.
func (a *Announcer) inMajority(alive []election.Node, known int) bool {
	return 2*len(alive) >= known
}

// aliveNodes are the Nodes whose agents are alive, as the election sees them,
// and how many Nodes run an agent at all.
func (a *Announcer) aliveNodes(ctx context.Context) (alive []election.Node, known int, err error) {
	var list corev1.NodeList
	if err := a.Client.List(ctx, &list); err != nil {
		return nil, 0, fmt.Errorf("list Nodes: %w", err)
	}
	members := a.Liveness.Alive()
	var out []election.Node
	for i := range list.Items {
		n := &list.Items[i]
		if !n.DeletionTimestamp.IsZero() {
			continue
		}
		if _, runsAgent := n.Annotations[paasv1.NodeInterfacesAnnotation]; runsAgent {
			known++
		}
		draining, ok := members[n.Name]
		if !ok {
			continue
		}
		en := election.NodeOf(n)
		en.Draining = draining
		out = append(out, en)
	}
	return out, known, nil
}

// claim records on the ledger that this node announces vip, unless it says so already.
func (a *Announcer) claim(ctx context.Context, vip netip.Addr) error {
	var ip paasv1.IP
	if err := a.Client.Get(ctx, client.ObjectKey{Name: paasv1.IPObjectName(vip)}, &ip); err != nil {
		return client.IgnoreNotFound(err)
	}
	if slices.Equal(ip.Status.AnnouncedBy, []string{a.NodeName}) {
		return nil
	}
	patch := client.MergeFrom(ip.DeepCopy())
	ip.Status.AnnouncedBy = []string{a.NodeName}
	if err := a.Client.Status().Patch(ctx, &ip, patch); err != nil {
		return fmt.Errorf("record %s as announced by %s: %w", vip, a.NodeName, err)
	}
	return nil
}

// ReportConflicts turns the speaker's conflicts into a condition on the ledger
// object and a Warning Event, until ctx ends.
func (a *Announcer) ReportConflicts(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-a.Speaker.Conflicts():
			arpConflicts.Inc()
			if err := a.reportConflict(ctx, c); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "report address conflict", "vip", c.VIP, "mac", c.MAC.String())
			}
		}
	}
}

func (a *Announcer) reportConflict(ctx context.Context, c l2.Conflict) error {
	var ip paasv1.IP
	if err := a.Client.Get(ctx, client.ObjectKey{Name: paasv1.IPObjectName(c.VIP)}, &ip); err != nil {
		return err
	}
	if expected, err := a.legacyAnnouncer(ctx, c.VIP); err != nil || expected {
		// A legacy VirtualIP migrating to this address: its keepalived node
		// answers too until the hand-over ends. That is the plan, not a conflict.
		return err
	}
	msg := fmt.Sprintf("%s answers %s for %s on the segment of %s/%s, which announces it: another host uses the address or a second load balancer announces it; remove it there, or exclude %s from the IPGroup",
		c.MAC, protocolOf(c.VIP), c.VIP, a.NodeName, c.Interface, c.VIP)
	a.Recorder.Event(&ip, corev1.EventTypeWarning, EventARPConflict, msg)
	if o := ip.Spec.Owner; o != nil {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name, UID: o.UID}}
		a.Recorder.Event(svc, corev1.EventTypeWarning, EventARPConflict, msg)
	}
	patch := client.MergeFrom(ip.DeepCopy())
	meta := metav1.Condition{Type: paasv1.IPConditionConflict, Status: metav1.ConditionTrue, Reason: paasv1.ReasonForeignMAC, Message: msg}
	setCondition(&ip.Status.Conditions, meta)
	return a.Client.Status().Patch(ctx, &ip, patch)
}

// protocolOf names what resolves vip on a LAN: ARP, or NDP for IPv6.
func protocolOf(vip netip.Addr) string {
	if vip.Is4() {
		return "ARP"
	}
	return "NDP"
}

// legacyAnnouncer reports whether a legacy VirtualIP of vip is being migrated,
// so its keepalived node may still answer ARP for it.
func (a *Announcer) legacyAnnouncer(ctx context.Context, vip netip.Addr) (bool, error) {
	var legacy paasv1.VirtualIPList
	if err := a.Client.List(ctx, &legacy); err != nil {
		return false, fmt.Errorf("list VirtualIPs: %w", err)
	}
	for i := range legacy.Items {
		if addr, ok := legacy.Items[i].Addr(); ok && addr == vip && legacy.Items[i].LegacyARPExpected() {
			return true, nil
		}
	}
	return false, nil
}

func setCondition(conds *[]metav1.Condition, c metav1.Condition) {
	for i := range *conds {
		if (*conds)[i].Type == c.Type {
			if (*conds)[i].Status != c.Status {
				c.LastTransitionTime = metav1.Now()
			} else {
				c.LastTransitionTime = (*conds)[i].LastTransitionTime
			}
			(*conds)[i] = c
			return
		}
	}
	c.LastTransitionTime = metav1.Now()
	*conds = append(*conds, c)
}

// OurMACs reports whether mac belongs to an interface of one of the cluster's
// nodes, from the Nodes' interface annotations in the cache.
func (a *Announcer) OurMACs(ctx context.Context) func(net.HardwareAddr) bool {
	return func(mac net.HardwareAddr) bool {
		var list corev1.NodeList
		if err := a.Client.List(ctx, &list); err != nil {
			return false
		}
		for _, n := range list.Items {
			for _, ifc := range paasv1.ParseNodeInterfaces(n.Annotations[paasv1.NodeInterfacesAnnotation]) {
				if ifc.MAC == mac.String() {
					return true
				}
			}
		}
		return false
	}
}

// SetupWithManager funnels every relevant change, and every change of the
// agents' liveness, into the single announce request.
func (a *Announcer) SetupWithManager(mgr ctrl.Manager) error {
	toAnnounce := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{announceRequest}
	})
	changed := make(chan event.GenericEvent, 1)
	go func() {
		for range a.Liveness.Changed() {
			select {
			case changed <- event.GenericEvent{Object: &corev1.Node{}}:
			default:
			}
		}
	}()
	return ctrl.NewControllerManagedBy(mgr).
		Named("announce").
		Watches(&corev1.Service{}, toAnnounce).
		Watches(&discoveryv1.EndpointSlice{}, toAnnounce).
		Watches(&corev1.Node{}, toAnnounce).
		Watches(&paasv1.IPGroup{}, toAnnounce).
		Watches(&paasv1.IP{}, toAnnounce).
		Watches(&paasv1.BGPPeer{}, toAnnounce).
		WatchesRawSource(source.Channel(changed, toAnnounce)).
		Complete(a)
}
