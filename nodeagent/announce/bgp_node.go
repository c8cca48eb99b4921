package announce

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent/bgp"
)

// nodeIdentity is what this node's annotations (paasv1.NodeBGPASNAnnotation
// and its siblings) make its BGP sessions peer as, checked. A Node's
// annotations are written by an administrator or the node's own kubelet, so
// they may only shape this node's own sessions: nothing here reaches another
// node, and a value that fails a check is not half-used.
type nodeIdentity struct {
	asn      uint32     // 0: each BGPPeer's myASN
	routerID netip.Addr // invalid: the BGPPeers' routerID or the InternalIP
	source4  netip.Addr // invalid: the kernel's choice
	source6  netip.Addr
	// invalid says why the annotations cannot be used: the node then peers
	// with nobody, rather than as an identity the fabric does not expect
	// (a rack's router refuses a session from the wrong ASN anyway).
	invalid string
}

// asTrans is the 2-byte ASN that stands for a 4-byte one (RFC 6793): no
// speaker may be configured with it.
const asTrans = 23456

// nodeIdentityOf reads node's BGP annotations; own are the node's own
// addresses (a source address must be one of them), read only when an
// annotation names one.
func nodeIdentityOf(node *corev1.Node, own func() (map[netip.Addr]string, error)) nodeIdentity {
	var id nodeIdentity
	if node == nil {
		return id
	}
	a := node.Annotations
	if v, ok := a[paasv1.NodeBGPASNAnnotation]; ok {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
		if err != nil || n == 0 || n == asTrans || n == 4294967295 {
			return invalidIdentity(paasv1.NodeBGPASNAnnotation, v, "want an ASN from 1 to 4294967294, not 23456 (AS_TRANS)")
		}
		id.asn = uint32(n)
	}
	if v, ok := a[paasv1.NodeBGPRouterIDAnnotation]; ok {
		ip, err := netip.ParseAddr(strings.TrimSpace(v))
		if err != nil || !ip.Is4() || ip.IsUnspecified() || ip.IsMulticast() || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			return invalidIdentity(paasv1.NodeBGPRouterIDAnnotation, v, "want an IPv4 unicast address, such as 192.0.2.1")
		}
		id.routerID = ip
	}
	if v, ok := a[paasv1.NodeBGPSourceAddressAnnotation]; ok {
		if why := id.readSources(v, own); why != "" {
			return invalidIdentity(paasv1.NodeBGPSourceAddressAnnotation, v, why)
		}
	}
	return id
}

func invalidIdentity(key, value, why string) nodeIdentity {
	return nodeIdentity{invalid: fmt.Sprintf("this Node's annotation %s=%q: %s; fix or remove it", key, value, why)}
}

// readSources sets the source addresses value names, or says why not.
func (id *nodeIdentity) readSources(value string, own func() (map[netip.Addr]string, error)) string {
	local, err := own()
	if err != nil {
		return fmt.Sprintf("cannot read the node's addresses: %v", err)
	}
	for _, f := range strings.Split(value, ",") {
		ip, err := netip.ParseAddr(strings.TrimSpace(f))
		if err != nil || ip.Zone() != "" {
			return fmt.Sprintf("%q is not an IP address", strings.TrimSpace(f))
		}
		ip = ip.Unmap()
		if !ip.IsGlobalUnicast() {
			return fmt.Sprintf("%s is not a unicast address a router can reach (no loopback, link-local or multicast)", ip)
		}
		if _, mine := local[ip]; !mine {
			return fmt.Sprintf("%s is not an address of this node's interfaces", ip)
		}
		slot := &id.source6
		if ip.Is4() {
			slot = &id.source4
		}
		if slot.IsValid() {
			return "at most one address per family"
		}
		*slot = ip
	}
	return ""
}

// apply gives p this node's ASN and source address of p's family, if any.
func (id nodeIdentity) apply(p *bgp.Peer) {
	if id.asn != 0 {
		p.MyASN = id.asn
	}
	switch {
	case p.Interface != "": // unnumbered: the link-local address of the interface
	case p.Address.Is4():
		p.Source = id.source4
	default:
		p.Source = id.source6
	}
}
