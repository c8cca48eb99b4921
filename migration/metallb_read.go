package migration

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// Switching from MetalLB: MetalLB's objects are read as unstructured (this project has no
// MetalLB Go dependency) and parsed once, here, into the plain types below, which carry only
// the fields the conversion looks at, under MetalLB's JSON names. metallb_convert.go decides
// from them; metallb_apply.go writes what it decided.

// MetalLBGroup is the API group of MetalLB's objects.
const MetalLBGroup = "metallb.io"

// MetalLBState is one snapshot of a MetalLB installation and of the Services it serves.
type MetalLBState struct {
	// Namespace MetalLB runs in (and reads its objects from).
	Namespace   string
	Pools       []unstructured.Unstructured // IPAddressPool
	L2Ads       []unstructured.Unstructured // L2Advertisement
	BGPAds      []unstructured.Unstructured // BGPAdvertisement
	Peers       []unstructured.Unstructured // BGPPeer, v1beta1 or v1beta2
	Communities []unstructured.Unstructured // Community
	BFDProfiles []unstructured.Unstructured // BFDProfile
	Services    []corev1.Service
	// Deployments of MetalLB's namespace, to find its controller by.
	Deployments []appsv1.Deployment
	// DaemonSets of MetalLB's namespace, to find its speakers by.
	DaemonSets []appsv1.DaemonSet
	// AgentDaemonSet is the agents' DaemonSet in AgentNamespace (nil: none yet).
	AgentDaemonSet *appsv1.DaemonSet
	AgentNamespace string
	// Groups are the IPGroups that exist already.
	Groups []paasv1.IPGroup
	// NamespaceLabels of every namespace, for MetalLB's namespace selectors.
	NamespaceLabels map[string]map[string]string
}

type mlbPool struct {
	Name              string            `json:"-"`
	Labels            map[string]string `json:"-"`
	Addresses         []string          `json:"addresses"`
	AutoAssign        *bool             `json:"autoAssign"`
	AvoidBuggyIPs     bool              `json:"avoidBuggyIPs"`
	ServiceAllocation *struct {
		Priority           int                    `json:"priority"`
		Namespaces         []string               `json:"namespaces"`
		NamespaceSelectors []metav1.LabelSelector `json:"namespaceSelectors"`
		ServiceSelectors   []metav1.LabelSelector `json:"serviceSelectors"`
	} `json:"serviceAllocation"`
}

// parsedPool is a pool with its addresses parsed; bad lists the entries that do not parse.
type parsedPool struct {
	*mlbPool
	ranges []addrRange
	bad    []string
}

type mlbAdvertisement struct {
	Kind                   string                 `json:"-"` // L2Advertisement or BGPAdvertisement
	Name                   string                 `json:"-"`
	IPAddressPools         []string               `json:"ipAddressPools"`
	IPAddressPoolSelectors []metav1.LabelSelector `json:"ipAddressPoolSelectors"`
	NodeSelectors          []metav1.LabelSelector `json:"nodeSelectors"`
	ServiceSelectors       []metav1.LabelSelector `json:"serviceSelectors"`
	// L2 only.
	Interfaces []string `json:"interfaces"`
	// BGP only.
	AggregationLength   *int32   `json:"aggregationLength"`
	AggregationLengthV6 *int32   `json:"aggregationLengthV6"`
	LocalPref           uint32   `json:"localPref"`
	Communities         []string `json:"communities"`
	Peers               []string `json:"peers"`
}

// mlbPeer holds the fields of both BGPPeer versions: v1beta2 added the ones marked so, and
// v1beta1's nodeSelectors (matchLabels, matchExpressions of key/operator/values) read as
// label selectors.
type mlbPeer struct {
	Name           string                 `json:"-"`
	Version        string                 `json:"-"`
	MyASN          int64                  `json:"myASN"`
	PeerASN        int64                  `json:"peerASN"`
	PeerAddress    string                 `json:"peerAddress"`
	PeerPort       int32                  `json:"peerPort"`
	SourceAddress  string                 `json:"sourceAddress"`
	HoldTime       *metav1.Duration       `json:"holdTime"`
	KeepaliveTime  *metav1.Duration       `json:"keepaliveTime"`
	RouterID       string                 `json:"routerID"`
	NodeSelectors  []metav1.LabelSelector `json:"nodeSelectors"`
	Password       string                 `json:"password"`
	BFDProfile     string                 `json:"bfdProfile"`
	EBGPMultiHop   bool                   `json:"ebgpMultiHop"`
	PasswordSecret *struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"passwordSecret"` // v1beta2
	LocalASN               int64            `json:"localASN"`              // v1beta2
	DynamicASN             string           `json:"dynamicASN"`            // v1beta2
	Interface              string           `json:"interface"`             // v1beta2
	ConnectTime            *metav1.Duration `json:"connectTime"`           // v1beta2
	EnableGracefulRestart  bool             `json:"enableGracefulRestart"` // v1beta2
	VRF                    string           `json:"vrf"`                   // v1beta2
	DisableMP              bool             `json:"disableMP"`             // v1beta2
	DualStackAddressFamily bool             `json:"dualStackAddressFamily"`
}

type mlbCommunities struct {
	Name        string `json:"-"`
	Communities []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"communities"`
}

type mlbBFDProfile struct {
	Name             string `json:"-"`
	ReceiveInterval  *int32 `json:"receiveInterval"`
	TransmitInterval *int32 `json:"transmitInterval"`
	DetectMultiplier *int32 `json:"detectMultiplier"`
	EchoInterval     *int32 `json:"echoInterval"`
	EchoMode         *bool  `json:"echoMode"`
	PassiveMode      *bool  `json:"passiveMode"`
	MinimumTTL       *int32 `json:"minimumTtl"`
}

// specOf decodes obj's spec into out; a spec that does not decode is reported, not guessed at.
func specOf(obj *unstructured.Unstructured, out any) error {
	spec, _, err := unstructured.NestedMap(obj.Object, "spec")
	if err != nil {
		return fmt.Errorf("%s %s: spec: %w", obj.GetKind(), obj.GetName(), err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, out); err != nil {
		return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

// addrRange is one part of a pool: first to last, inclusive, of one family.
type addrRange struct{ first, last netip.Addr }

func (r addrRange) contains(a netip.Addr) bool {
	return a.BitLen() == r.first.BitLen() && r.first.Compare(a) <= 0 && a.Compare(r.last) <= 0
}

// parseMetalLBAddress reads an entry of IPAddressPool.spec.addresses as MetalLB does: a CIDR,
// or "first-last" (spaces around the dash allowed).
func parseMetalLBAddress(s string) (addrRange, error) {
	if first, last, ok := strings.Cut(s, "-"); ok {
		a, err := netip.ParseAddr(strings.TrimSpace(first))
		if err != nil {
			return addrRange{}, fmt.Errorf("range %q: start: %w", s, err)
		}
		b, err := netip.ParseAddr(strings.TrimSpace(last))
		if err != nil {
			return addrRange{}, fmt.Errorf("range %q: end: %w", s, err)
		}
		if a.BitLen() != b.BitLen() || b.Less(a) {
			return addrRange{}, fmt.Errorf("range %q: start and end are of two families or in the wrong order", s)
		}
		return addrRange{a.Unmap(), b.Unmap()}, nil
	}
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return addrRange{}, fmt.Errorf("%q is neither a CIDR nor a range: %w", s, err)
	}
	p = p.Masked()
	last := p.Addr()
	for bits := p.Bits(); bits < last.BitLen(); bits++ {
		last = setBit(last, bits)
	}
	return addrRange{p.Addr(), last}, nil
}

// setBit sets bit i (0 = the most significant) of a.
func setBit(a netip.Addr, i int) netip.Addr {
	b := a.AsSlice()
	b[i/8] |= 0x80 >> (i % 8)
	out, _ := netip.AddrFromSlice(b)
	return out
}

// metallbObjects are the parsed objects of a MetalLBState.
type metallbObjects struct {
	pools       []parsedPool
	ads         []*mlbAdvertisement
	peers       []*mlbPeer
	communities map[string]string // alias -> value
	bfd         map[string]*mlbBFDProfile
	// notes on objects that did not parse or that carry nothing over.
	problems []string
}

// parseMetalLB parses st once; an object that does not parse is reported and left out.
func parseMetalLB(st MetalLBState) metallbObjects {
	var o metallbObjects
	for i := range st.Pools {
		p := parsedPool{mlbPool: &mlbPool{}}
		if err := specOf(&st.Pools[i], p.mlbPool); err != nil {
			o.problems = append(o.problems, err.Error())
			continue
		}
		// Set after decoding: a spec key cannot override them.
		p.Name, p.Labels = st.Pools[i].GetName(), st.Pools[i].GetLabels()
		for _, a := range p.Addresses {
			r, err := parseMetalLBAddress(a)
			if err != nil {
				p.bad = append(p.bad, err.Error())
				continue
			}
			p.ranges = append(p.ranges, r)
		}
		o.pools = append(o.pools, p)
	}
	for kind, list := range map[string][]unstructured.Unstructured{"L2Advertisement": st.L2Ads, "BGPAdvertisement": st.BGPAds} {
		for i := range list {
			ad := &mlbAdvertisement{}
			if err := specOf(&list[i], ad); err != nil {
				o.problems = append(o.problems, err.Error())
				continue
			}
			ad.Kind, ad.Name = kind, list[i].GetName()
			o.ads = append(o.ads, ad)
		}
	}
	for i := range st.Peers {
		p := &mlbPeer{}
		if err := specOf(&st.Peers[i], p); err != nil {
			o.problems = append(o.problems, err.Error())
			continue
		}
		p.Name, p.Version = st.Peers[i].GetName(), st.Peers[i].GroupVersionKind().Version
		o.peers = append(o.peers, p)
	}
	o.communities = map[string]string{}
	for i := range st.Communities {
		c := &mlbCommunities{}
		if err := specOf(&st.Communities[i], c); err != nil {
			o.problems = append(o.problems, err.Error())
			continue
		}
		for _, a := range c.Communities {
			o.communities[a.Name] = a.Value
		}
	}
	o.bfd = map[string]*mlbBFDProfile{}
	for i := range st.BFDProfiles {
		b := &mlbBFDProfile{}
		if err := specOf(&st.BFDProfiles[i], b); err != nil {
			o.problems = append(o.problems, err.Error())
			continue
		}
		b.Name = st.BFDProfiles[i].GetName()
		o.bfd[b.Name] = b
	}
	return o
}

// metallbSpeakerGossip reads, from the DaemonSets of MetalLB's namespace that
// MetalLB's manifests (component=speaker, app=metallb) or its Helm chart
// (app.kubernetes.io/component=speaker, app.kubernetes.io/name=metallb) label
// as its speaker, the memberlist each starts, as MetalLB's speaker decides it
// at start: on only when both its bind address and its labels are set, on
// memberlist's port 7946 unless its bind port is set, each by its flag or,
// failing that, its environment variable.
func metallbSpeakerGossip(dss []appsv1.DaemonSet) []speakerGossip {
	var out []speakerGossip
	for _, ds := range dss {
		l := ds.Labels
		if (l["component"] != "speaker" || l["app"] != "metallb") &&
			(l["app.kubernetes.io/component"] != "speaker" || l["app.kubernetes.io/name"] != "metallb") {
			continue
		}
		g := speakerGossip{DaemonSet: Object{"DaemonSet", ds.Namespace, ds.Name, ds.UID}}
		pod := ds.Spec.Template.Spec
		i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == "speaker" })
		switch {
		case i < 0:
			g.Unknown = "no container named speaker"
		case !pod.HostNetwork:
			// Each pod binds in its own network namespace: no node port to share.
			g.Off = "runs without hostNetwork"
		default:
			g.Off, g.Port, g.Unknown = speakerMemberlist(pod.Containers[i])
		}
		out = append(out, g)
	}
	return out
}

// metallbMemberlistPort is memberlist's default port (DefaultLANConfig's
// BindPort), which MetalLB's speaker keeps when its bind port is not set.
const metallbMemberlistPort = 7946

// speakerMemberlist is what a speaker container starts: off says why no
// memberlist, else port, or unknown says why the port cannot be told.
func speakerMemberlist(c corev1.Container) (off string, port int, unknown string) {
	addr, addrKnown := speakerSetting(c, "ml-bindaddr", "METALLB_ML_BIND_ADDR")
	labels, labelsKnown := speakerSetting(c, "ml-labels", "METALLB_ML_LABELS")
	switch {
	case addrKnown && addr == "":
		return "memberlist off (neither --ml-bindaddr nor METALLB_ML_BIND_ADDR is set)", 0, ""
	case labelsKnown && labels == "":
		return "memberlist off (neither --ml-labels nor METALLB_ML_LABELS is set)", 0, ""
	}
	v, known := speakerSetting(c, "ml-bindport", "METALLB_ML_BIND_PORT")
	switch {
	case !known:
		return "", 0, "its bind port comes from a reference, not a value"
	case v == "":
		return "", metallbMemberlistPort, ""
	}
	p, err := strconv.Atoi(v)
	if err != nil || p <= 0 || p > 65535 {
		return fmt.Sprintf("memberlist bind port %q does not parse: the speaker exits at start", v), 0, ""
	}
	return "", p, ""
}

// speakerSetting is the value of one of the speaker's flags: from its command
// or args, else from the environment variable that is the flag's default.
// known is false when the value is not written in the DaemonSet (valueFrom,
// envFrom, $(VAR)); a valueFrom is then still set, as MetalLB's manifests set
// the bind address from the pod's IP.
func speakerSetting(c corev1.Container, flag, env string) (value string, known bool) {
	if v, ok := flagValue(append(slices.Clone(c.Command), c.Args...), flag); ok {
		return v, !strings.Contains(v, "$(")
	}
	found := false
	for _, e := range c.Env { // a later entry of a name wins, as in the kubelet
		if e.Name != env {
			continue
		}
		found = true
		value, known = e.Value, e.ValueFrom == nil && !strings.Contains(e.Value, "$(")
	}
	if !found {
		return "", len(c.EnvFrom) == 0
	}
	return value, known
}

// agentGossipOf reads the agents' gossip port from their DaemonSet (nil: not
// created yet, so the default).
func agentGossipOf(ds *appsv1.DaemonSet, namespace string) agentGossip {
	if ds == nil {
		return agentGossip{paasv1.AgentMemberlistPort, fmt.Sprintf("the default: no DaemonSet %s/%s yet", namespace, paasv1.AgentDaemonSet)}
	}
	name := fmt.Sprintf("DaemonSet %s/%s", ds.Namespace, ds.Name)
	var args []string
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == "agent" {
			args = append(slices.Clone(c.Command), c.Args...)
		}
	}
	v, ok := flagValue(args, "memberlist-port")
	if !ok {
		return agentGossip{paasv1.AgentMemberlistPort, name + ", the default"}
	}
	p, err := strconv.Atoi(v)
	if err != nil || p <= 0 || p > 65535 {
		return agentGossip{0, fmt.Sprintf("%s: --memberlist-port=%q does not parse", name, v)}
	}
	return agentGossip{p, name + ", --memberlist-port"}
}
