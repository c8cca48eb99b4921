package migration

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
	"github.com/paas-org/vip-allocator-operator/internal/ingress"
	"github.com/paas-org/vip-allocator-operator/internal/lbclass"
)

// MetalLBPlan is what "migrate metallb apply" creates and what the operator then does with
// the Services MetalLB serves, decided by ConvertMetalLB from one snapshot.
type MetalLBPlan struct {
	Namespace string
	// Counts of the objects read, by kind, for the plan's first line.
	Counts   map[string]int
	Groups   []GroupConversion
	Peers    []PeerConversion
	Services []ServiceFate
	// Controller is MetalLB's controller Deployment, which --scale-down-controller
	// scales to 0 (nil: none found, or more than one looks like it).
	Controller *Object
	// NotTouched names objects that resemble what apply acts on, and why it leaves them.
	NotTouched []string
	// Notes on objects that become part of others (Communities, BFDProfiles).
	Notes []string
	// Gossip compares each MetalLB speaker's memberlist port with the agents'.
	Gossip []string
	// GossipClashes name the speakers that gossip on the agents' port (also
	// under Problems): apply refuses to write anything while there is one.
	GossipClashes []string
	// Problems are what the conversion cannot do, each with its cause and the fix.
	Problems []string
}

// GroupConversion is one IPAddressPool and the IPGroup of the same name it becomes.
type GroupConversion struct {
	Pool  string
	Group paasv1.IPGroup
	// AnnouncedBy names the advertisements the announcement comes from.
	AnnouncedBy []string
	// Dropped is what is not carried over, and why.
	Dropped []string
	// Exists: an identical IPGroup of the name exists already; apply leaves it.
	Exists bool
	// Conflict says why apply refuses the pool: an IPGroup of the name exists and differs.
	Conflict string
	ranges   []addrRange
}

// PeerConversion is one MetalLB BGPPeer and the BGPPeer it becomes (nil: none).
type PeerConversion struct {
	Name, Version string
	Peer          *paasv1.BGPPeer
	// PasswordFrom is the MetalLB Secret (namespace/name, key "password") whose password
	// apply copies into PasswordSecret; Password a plain-text one from spec.password.
	PasswordFrom types.NamespacedName
	Password     string
	// PasswordRefused says why the peer is not converted: its password Secret
	// is outside MetalLB's namespace.
	PasswordRefused string
	Dropped         []string
}

// ServiceFate is what becomes of a Service MetalLB serves.
type ServiceFate struct {
	Service   types.NamespacedName
	Pool      string // the pool (and IPGroup) holding its addresses, "" if none
	Addresses []string
	Keeps     bool
	// Note says why it does not keep its addresses, or what it shares them with.
	Note string
}

// MetalLBPasswordSecret is the Secret, in the operator's namespace and labelled
// vip.paas.org/bgp-password, into which apply copies the converted BGPPeers' passwords (one key
// per peer, the peer's name).
const MetalLBPasswordSecret = "metallb-bgp-passwords"

// metallbSharingKey is the allow-shared-ip key of a Service, under either prefix.
func metallbSharingKey(svc *corev1.Service) string {
	for _, k := range []string{"metallb.io/allow-shared-ip", "metallb.universe.tf/allow-shared-ip"} {
		if v := strings.TrimSpace(svc.Annotations[k]); v != "" {
			return v
		}
	}
	return ""
}

// metallbNoPriority is the IPGroup priority of a pool without one when others have one:
// MetalLB tries pools without a priority last, the operator tries lower numbers first.
const metallbNoPriority = 1000000

// metallbDefaultHoldTime is MetalLB's hold time when a BGPPeer sets none; its keepalive
// defaults to a third of the hold time.
const metallbDefaultHoldTime = 90 * time.Second

// ConvertMetalLB decides the conversion of st. It is pure: st is one snapshot.
func ConvertMetalLB(st MetalLBState) MetalLBPlan {
	o := parseMetalLB(st)
	p := MetalLBPlan{Namespace: st.Namespace, Problems: o.problems, Counts: map[string]int{
		"IPAddressPool": len(st.Pools), "L2Advertisement": len(st.L2Ads), "BGPAdvertisement": len(st.BGPAds),
		"BGPPeer": len(st.Peers), "Community": len(st.Communities), "BFDProfile": len(st.BFDProfiles)}}
	slices.SortFunc(o.pools, func(a, b parsedPool) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(o.ads, func(a, b *mlbAdvertisement) int { return cmp.Compare(a.Kind+"/"+a.Name, b.Kind+"/"+b.Name) })
	slices.SortFunc(o.peers, func(a, b *mlbPeer) int { return cmp.Compare(a.Name, b.Name) })
	anyPriority := slices.ContainsFunc(o.pools, func(pl parsedPool) bool { return pl.ServiceAllocation != nil && pl.ServiceAllocation.Priority > 0 })
	for _, pool := range o.pools {
		g := convertPool(pool, o, anyPriority)
		if g.Exists, g.Conflict = existingGroup(&g.Group, st.Groups); g.Conflict != "" {
			p.Problems = append(p.Problems, g.Conflict)
		}
		p.Groups = append(p.Groups, g)
	}
	var problem string
	if p.Controller, p.NotTouched, problem = metallbController(st.Deployments); problem != "" {
		p.Problems = append(p.Problems, problem)
	}
	p.Gossip, p.GossipClashes = gossipCheck(st.Namespace, metallbSpeakerGossip(st.DaemonSets),
		agentGossipOf(st.AgentDaemonSet, cmp.Or(st.AgentNamespace, paasv1.DefaultNamespace)))
	p.Problems = append(p.Problems, p.GossipClashes...)
	for _, ad := range o.ads {
		if !slices.ContainsFunc(o.pools, func(pl parsedPool) bool { return ad.selects(pl.mlbPool) }) {
			p.Notes = append(p.Notes, fmt.Sprintf("%s %s selects no IPAddressPool: nothing to carry over", ad.Kind, ad.Name))
		}
	}
	for _, peer := range o.peers {
		c := convertPeer(peer, st.Namespace, o.bfd)
		if c.Peer == nil && c.PasswordRefused != "" {
			p.Problems = append(p.Problems, c.PasswordRefused)
		}
		p.Peers = append(p.Peers, c)
	}
	for _, c := range st.Communities {
		p.Notes = append(p.Notes, fmt.Sprintf("Community %s: its aliases are resolved into the IPGroups' announce.bgp.communities", c.GetName()))
	}
	for _, b := range st.BFDProfiles {
		var users []string
		for _, peer := range o.peers {
			if peer.BFDProfile == b.GetName() {
				users = append(users, peer.Name)
			}
		}
		use := "used by no BGPPeer: nothing to carry over"
		if len(users) > 0 {
			use = "copied into spec.bfd of BGPPeer " + strings.Join(users, ", ")
		}
		p.Notes = append(p.Notes, fmt.Sprintf("BFDProfile %s: %s", b.GetName(), use))
	}
	slices.Sort(p.Notes)
	p.Services = serviceFates(st, p.Groups)
	return p
}

// selects reports whether ad applies to pool: no pool named and no selector means every pool.
func (ad *mlbAdvertisement) selects(pool *mlbPool) bool {
	if len(ad.IPAddressPools) == 0 && len(ad.IPAddressPoolSelectors) == 0 {
		return true
	}
	if slices.Contains(ad.IPAddressPools, pool.Name) {
		return true
	}
	for i := range ad.IPAddressPoolSelectors {
		if sel, err := metav1.LabelSelectorAsSelector(&ad.IPAddressPoolSelectors[i]); err == nil && sel.Matches(labels.Set(pool.Labels)) {
			return true
		}
	}
	return false
}

func convertPool(pool parsedPool, o metallbObjects, anyPriority bool) GroupConversion {
	g := GroupConversion{Pool: pool.Name, ranges: pool.ranges}
	g.Group.Name = pool.Name
	// The pool's parts in MetalLB's syntax, which spec.addresses shares.
	g.Group.Spec.Addresses = canonicalAddresses(pool.Addresses)
	g.Group.Spec.AvoidBuggyIPs = pool.AvoidBuggyIPs
	g.Group.Spec.AutoAssign = ptr.To(pool.AutoAssign == nil || *pool.AutoAssign)
	for _, bad := range pool.bad {
		g.Dropped = append(g.Dropped, "address "+bad+": MetalLB would refuse it too; fix or remove it")
	}
	if a := pool.ServiceAllocation; a != nil {
		switch {
		case a.Priority > 0:
			g.Group.Spec.Priority = int32(min(a.Priority, metallbNoPriority-1))
		case anyPriority:
			g.Group.Spec.Priority = metallbNoPriority
		}
		var nsDropped string
		g.Group.Spec.NamespaceSelector, nsDropped = namespaceSelector(a.Namespaces, a.NamespaceSelectors)
		var svcDropped string
		g.Group.Spec.ServiceSelector, svcDropped = oneSelector("serviceAllocation.serviceSelectors", a.ServiceSelectors)
		for _, d := range []string{nsDropped, svcDropped} {
			if d != "" {
				g.Dropped = append(g.Dropped, d)
			}
		}
	} else if anyPriority {
		g.Group.Spec.Priority = metallbNoPriority
	}
	var l2, bgp []*mlbAdvertisement
	for _, ad := range o.ads {
		if !ad.selects(pool.mlbPool) {
			continue
		}
		g.AnnouncedBy = append(g.AnnouncedBy, ad.Kind+" "+ad.Name)
		if ad.Kind == "L2Advertisement" {
			l2 = append(l2, ad)
		} else {
			bgp = append(bgp, ad)
		}
		if len(ad.ServiceSelectors) > 0 {
			g.Dropped = append(g.Dropped, fmt.Sprintf("%s %s serviceSelectors: MetalLB announces only the pool's Services they match; an IPGroup announces all its Services (split the pool into groups by serviceSelector to keep the difference)", ad.Kind, ad.Name))
		}
	}
	announce := &paasv1.Announce{}
	switch {
	case len(bgp) > 0:
		announce.Mode = paasv1.AnnounceBGP
		g.Dropped = append(g.Dropped, convertBGPAds(announce, bgp, o.communities)...)
		if len(l2) > 0 {
			g.Dropped = append(g.Dropped, fmt.Sprintf("%s: MetalLB announces the pool by L2 and BGP at once; an IPGroup announces one way, BGP here (split the pool in two groups to keep both)", adNames(l2)))
		}
	case len(l2) > 0:
		announce.Mode = paasv1.AnnounceL2
		g.Dropped = append(g.Dropped, convertL2Ads(announce, l2)...)
	default:
		announce.Mode = paasv1.AnnounceNone
		g.Dropped = append(g.Dropped, "no L2Advertisement or BGPAdvertisement selects the pool, so MetalLB does not announce it: the IPGroup's announce.mode is None (the network must route it)")
	}
	g.Group.Spec.Announce = announce
	return g
}

// convertL2Ads merges the pool's L2Advertisements: interfaces and node selectors are ORed.
func convertL2Ads(a *paasv1.Announce, ads []*mlbAdvertisement) (dropped []string) {
	anyInterface := false
	for _, ad := range ads {
		if len(ad.Interfaces) == 0 {
			anyInterface = true
		}
		a.Interfaces = append(a.Interfaces, ad.Interfaces...)
	}
	if anyInterface {
		a.Interfaces = nil
	}
	slices.Sort(a.Interfaces)
	a.Interfaces = slices.Compact(a.Interfaces)
	a.NodeSelector, dropped = adNodeSelector(ads)
	return dropped
}

// convertBGPAds merges the pool's BGPAdvertisements into announce.bgp.
func convertBGPAds(a *paasv1.Announce, ads []*mlbAdvertisement, aliases map[string]string) (dropped []string) {
	b := &paasv1.BGPAnnounce{}
	allPeers := false
	var prefs []uint32
	for _, ad := range ads {
		if len(ad.Peers) == 0 {
			allPeers = true
		}
		b.Peers = append(b.Peers, ad.Peers...)
		for _, c := range ad.Communities {
			value, ok := aliases[c]
			if !ok {
				value = c
			}
			if v, ok := communityValue(value); ok {
				b.Communities = append(b.Communities, v)
			} else {
				dropped = append(dropped, fmt.Sprintf("BGPAdvertisement %s community %q: neither a community (65535:65281, large:64512:1:2) nor a Community alias; define it and plan again", ad.Name, c))
			}
		}
		if ad.LocalPref != 0 && !slices.Contains(prefs, ad.LocalPref) {
			prefs = append(prefs, ad.LocalPref)
		}
		if l := ad.AggregationLength; l != nil && *l != 32 {
			dropped = append(dropped, fmt.Sprintf("BGPAdvertisement %s aggregationLength %d: the agents advertise each address as a host route (/32); the router gets the more specific routes instead of the /%d (summarise on the router if the aggregate matters)", ad.Name, *l, *l))
		}
		if l := ad.AggregationLengthV6; l != nil && *l != 128 {
			dropped = append(dropped, fmt.Sprintf("BGPAdvertisement %s aggregationLengthV6 %d: the agents advertise each address as a host route (/128); the router gets the more specific routes instead of the /%d", ad.Name, *l, *l))
		}
	}
	if allPeers {
		b.Peers = nil
	}
	slices.Sort(b.Peers)
	b.Peers = slices.Compact(b.Peers)
	slices.Sort(b.Communities)
	b.Communities = slices.Compact(b.Communities)
	if len(prefs) > 0 {
		b.LocalPref = ptr.To(prefs[0])
	}
	if len(prefs) > 1 {
		dropped = append(dropped, fmt.Sprintf("localPref %v: the pool's BGPAdvertisements differ; an IPGroup has one localPref, %d kept", prefs, prefs[0]))
	}
	a.BGP = b
	ns, nsDropped := adNodeSelector(ads)
	a.NodeSelector = ns
	return append(dropped, nsDropped...)
}

// communityValue turns a MetalLB community ("65535:65281", "large:64512:1:2") into ours.
func communityValue(s string) (string, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "large:")
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return "", false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return "", false
		}
	}
	return s, true
}

// adNodeSelector: the nodes of several advertisements are ORed (an advertisement without
// nodeSelectors means every node); an IPGroup has one announce.nodeSelector.
func adNodeSelector(ads []*mlbAdvertisement) (*metav1.LabelSelector, []string) {
	var all []metav1.LabelSelector
	for _, ad := range ads {
		if len(ad.NodeSelectors) == 0 {
			return nil, nil
		}
		for _, s := range ad.NodeSelectors {
			if !slices.ContainsFunc(all, func(x metav1.LabelSelector) bool { return equality.Semantic.DeepEqual(x, s) }) {
				all = append(all, s)
			}
		}
	}
	sel, dropped := oneSelector(adNames(ads)+" nodeSelectors", all)
	if dropped != "" {
		return sel, []string{dropped}
	}
	return sel, nil
}

func adNames(ads []*mlbAdvertisement) string {
	var names []string
	for _, ad := range ads {
		names = append(names, ad.Kind+" "+ad.Name)
	}
	return strings.Join(names, ", ")
}

// oneSelector: MetalLB ORs a list of selectors; an IPGroup or BGPPeer has one. One is carried
// over as it is; of several, the first, and the rest is reported (the narrower choice: a
// Service or node only one of the others matched loses the pool rather than a stranger gaining it).
func oneSelector(what string, sels []metav1.LabelSelector) (*metav1.LabelSelector, string) {
	switch len(sels) {
	case 0:
		return nil, ""
	case 1:
		return sels[0].DeepCopy(), ""
	}
	return sels[0].DeepCopy(), fmt.Sprintf("%s: %d selectors, ORed in MetalLB; one is carried over (%s), what only the others match is left out: merge them into one selector",
		what, len(sels), metav1.FormatLabelSelector(&sels[0]))
}

// namespaceSelector turns serviceAllocation's namespaces (names) and namespaceSelectors (ORed)
// into one selector.
func namespaceSelector(names []string, sels []metav1.LabelSelector) (*metav1.LabelSelector, string) {
	if len(names) == 0 {
		return oneSelector("serviceAllocation.namespaceSelectors", sels)
	}
	names = slices.Sorted(slices.Values(names))
	byName := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: slices.Compact(names)}}}
	if len(sels) == 0 {
		return byName, ""
	}
	return byName, fmt.Sprintf("serviceAllocation.namespaceSelectors (%d) next to serviceAllocation.namespaces: ORed in MetalLB; the IPGroup admits the named namespaces only: label them and use one namespaceSelector", len(sels))
}

func convertPeer(peer *mlbPeer, namespace string, profiles map[string]*mlbBFDProfile) PeerConversion {
	c := PeerConversion{Name: peer.Name, Version: peer.Version}
	why := ""
	switch {
	case peer.VRF != "":
		why = fmt.Sprintf("its session runs in VRF %s; the agents speak BGP in the default VRF only", peer.VRF)
	case peer.Interface != "":
		why = fmt.Sprintf("it peers unnumbered on interface %s; write a BGPPeer with spec.interface %s by hand (it runs without BFD and multi-hop)", peer.Interface, peer.Interface)
	case peer.PeerAddress == "":
		why = "it has no peerAddress"
	case peer.PeerASN == 0:
		why = fmt.Sprintf("its peer ASN is discovered (dynamicASN %s); a BGPPeer needs the router's ASN", cmp.Or(peer.DynamicASN, "unset"))
	}
	if why != "" {
		c.Dropped = append(c.Dropped, "not converted: "+why+"; the VIPs this router learnt from MetalLB are not advertised to it")
		return c
	}
	spec := paasv1.BGPPeerSpec{PeerAddress: peer.PeerAddress, PeerASN: peer.PeerASN, MyASN: peer.MyASN,
		PeerPort: peer.PeerPort, RouterID: peer.RouterID}
	if spec.PeerPort == 0 {
		spec.PeerPort = 179
	}
	// The timers MetalLB ran the session with, so the router sees no change.
	hold := metallbDefaultHoldTime
	if peer.HoldTime != nil {
		hold = peer.HoldTime.Duration
	}
	keepalive := hold / 3
	if peer.KeepaliveTime != nil {
		keepalive = peer.KeepaliveTime.Duration
	}
	spec.HoldTime, spec.KeepaliveTime = &metav1.Duration{Duration: hold}, &metav1.Duration{Duration: keepalive}
	if peer.EBGPMultiHop {
		spec.EBGPMultiHop = ptr.To(true)
	}
	if peer.EnableGracefulRestart {
		spec.GracefulRestart = ptr.To(true)
	}
	var dropped string
	spec.NodeSelector, dropped = oneSelector("nodeSelectors", peer.NodeSelectors)
	if dropped != "" {
		c.Dropped = append(c.Dropped, dropped)
	}
	switch {
	case peer.PasswordSecret != nil && peer.PasswordSecret.Name != "":
		c.PasswordFrom = types.NamespacedName{Namespace: cmp.Or(peer.PasswordSecret.Namespace, namespace), Name: peer.PasswordSecret.Name}
		if c.PasswordFrom.Namespace != namespace {
			// The agents can read the Secret apply writes: a password is copied
			// there only from MetalLB's own namespace, never from another.
			c.PasswordRefused = fmt.Sprintf("BGPPeer %s: its passwordSecret %s is outside MetalLB's namespace %s; apply copies passwords only from there, so the peer is not converted: move the Secret to %s, point the BGPPeer at it and plan again",
				peer.Name, c.PasswordFrom, namespace, namespace)
			return PeerConversion{Name: c.Name, Version: c.Version, PasswordRefused: c.PasswordRefused,
				Dropped: []string{"not converted: " + c.PasswordRefused}}
		}
	case peer.Password != "":
		c.Password = peer.Password
	}
	if c.PasswordFrom.Name != "" || c.Password != "" {
		spec.PasswordSecret = &paasv1.SecretKeyRef{Name: MetalLBPasswordSecret, Key: peer.Name}
	}
	if peer.BFDProfile != "" {
		c.Dropped = append(c.Dropped, convertBFD(&spec, peer.BFDProfile, profiles[peer.BFDProfile])...)
	}
	if peer.SourceAddress != "" {
		c.Dropped = append(c.Dropped, fmt.Sprintf("sourceAddress %s: the agent's session uses the address of its route to the peer", peer.SourceAddress))
	}
	if peer.LocalASN != 0 && peer.LocalASN != peer.MyASN {
		c.Dropped = append(c.Dropped, fmt.Sprintf("localASN %d: the session uses myASN %d", peer.LocalASN, peer.MyASN))
	}
	if peer.ConnectTime != nil {
		c.Dropped = append(c.Dropped, fmt.Sprintf("connectTime %s: the agent retries on its own schedule", peer.ConnectTime.Duration))
	}
	if peer.DisableMP || peer.DualStackAddressFamily {
		c.Dropped = append(c.Dropped, "disableMP/dualStackAddressFamily: the agents send each family's routes as GoBGP negotiates with the router")
	}
	c.Peer = &paasv1.BGPPeer{Spec: spec}
	c.Peer.Name = peer.Name
	return c
}

// convertBFD copies a BFDProfile's timers into spec.bfd.
func convertBFD(spec *paasv1.BGPPeerSpec, name string, prof *mlbBFDProfile) (dropped []string) {
	if prof == nil {
		return []string{fmt.Sprintf("bfdProfile %s: no such BFDProfile; the session runs without BFD", name)}
	}
	if spec.EBGPMultiHop != nil && *spec.EBGPMultiHop {
		return []string{fmt.Sprintf("bfdProfile %s: BFD runs on single-hop sessions only here (RFC 5881) and the peer is multi-hop; the session runs without BFD", name)}
	}
	spec.BFD = &paasv1.BFDSettings{ReceiveInterval: prof.ReceiveInterval, TransmitInterval: prof.TransmitInterval, DetectMultiplier: prof.DetectMultiplier}
	if prof.EchoMode != nil && *prof.EchoMode {
		dropped = append(dropped, fmt.Sprintf("BFDProfile %s echoMode: the agents' BFD runs without echo; detection uses the control packets' timers", name))
	}
	if prof.PassiveMode != nil && *prof.PassiveMode {
		dropped = append(dropped, fmt.Sprintf("BFDProfile %s passiveMode: the agents start BFD actively", name))
	}
	if prof.MinimumTTL != nil && *prof.MinimumTTL != 254 {
		dropped = append(dropped, fmt.Sprintf("BFDProfile %s minimumTtl %d: single-hop BFD requires TTL 255 (RFC 5881)", name, *prof.MinimumTTL))
	}
	return dropped
}

// serviceFates decides, as the operator will, whether each Service MetalLB serves keeps its
// addresses: it does when the IPGroup converted from the pool holding them admits it, the pool
// it names (if any) is that one, and no other Service holds them without sharing.
func serviceFates(st MetalLBState, groups []GroupConversion) []ServiceFate {
	byAge := slices.Clone(st.Services)
	slices.SortStableFunc(byAge, func(x, y corev1.Service) int {
		if c := x.CreationTimestamp.Compare(y.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(x.Namespace+"/"+x.Name, y.Namespace+"/"+y.Name)
	})
	first := map[netip.Addr]*corev1.Service{} // address -> the oldest Service showing it
	var out []ServiceFate
	for i := range byAge {
		svc := &byAge[i]
		if !lbclass.Handles(svc, false) || !svc.DeletionTimestamp.IsZero() {
			continue
		}
		f := ServiceFate{Service: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, Keeps: true}
		var notes []string
		// The addresses as the operator adopts them (ingress.Shown): an IPv4-mapped one unmapped.
		for _, addr := range ingress.Shown(svc) {
			f.Addresses = append(f.Addresses, addr.String())
			g := groupHolding(groups, addr)
			if g == nil {
				f.Keeps = false
				notes = append(notes, fmt.Sprintf("%s is in no converted pool: the operator gives it a free address instead", addr))
				continue
			}
			f.Pool = g.Pool
			if why := notAdmitted(g, svc, st.NamespaceLabels[svc.Namespace]); why != "" {
				f.Keeps = false
				notes = append(notes, fmt.Sprintf("%s: IPGroup %s %s; the operator gives it a free address instead", addr, g.Pool, why))
			}
			if other, ok := first[addr]; ok {
				key, otherKey := metallbSharingKey(svc), metallbSharingKey(other)
				if key != "" && key == otherKey {
					notes = append(notes, fmt.Sprintf("shares %s with %s/%s (allow-shared-ip %q)", addr, other.Namespace, other.Name, key))
				} else {
					f.Keeps = false
					notes = append(notes, fmt.Sprintf("%s is shown by the older %s/%s too, without a common allow-shared-ip key: the older keeps it", addr, other.Namespace, other.Name))
				}
			} else {
				first[addr] = svc
			}
		}
		if len(f.Addresses) == 0 {
			continue // MetalLB gave it nothing: it is simply allocated by the operator
		}
		f.Note = strings.Join(notes, "; ")
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b ServiceFate) int { return cmp.Compare(a.Service.String(), b.Service.String()) })
	return out
}

func groupHolding(groups []GroupConversion, addr netip.Addr) *GroupConversion {
	for i := range groups {
		if slices.ContainsFunc(groups[i].ranges, func(r addrRange) bool { return r.contains(addr.Unmap()) }) {
			return &groups[i]
		}
	}
	return nil
}

// notAdmitted says why the converted group g would not give svc its address, or "".
func notAdmitted(g *GroupConversion, svc *corev1.Service, nsLabels map[string]string) string {
	if named := k8salloc.NamedGroups(svc); len(named) > 0 && !slices.Contains(named, g.Pool) {
		return fmt.Sprintf("is not the pool the Service names (%s)", strings.Join(named, ", "))
	}
	s := g.Group.Spec
	if sel, err := selectorOf(s.NamespaceSelector); err != nil || !sel.Matches(labels.Set(nsLabels)) {
		return "does not admit its namespace (namespaceSelector)"
	}
	if sel, err := selectorOf(s.ServiceSelector); err != nil || !sel.Matches(labels.Set(svc.Labels)) {
		return "does not admit it (serviceSelector)"
	}
	return ""
}

func selectorOf(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// canonicalAddresses writes a pool's parts without the spaces MetalLB tolerates around a
// range's dash: "192.0.2.10 - 192.0.2.19" becomes "192.0.2.10-192.0.2.19".
func canonicalAddresses(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		first, last, isRange := strings.Cut(s, "-")
		if isRange {
			s = strings.TrimSpace(first) + "-" + strings.TrimSpace(last)
		}
		out = append(out, strings.TrimSpace(s))
	}
	return out
}
