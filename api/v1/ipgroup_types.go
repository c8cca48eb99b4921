package v1

import (
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnounceMode says how the VIPs of a group are made reachable from outside.
// +kubebuilder:validation:Enum=L2;BGP;None
type AnnounceMode string

const (
	// AnnounceL2 answers ARP/NDP for each VIP from one owner node.
	AnnounceL2 AnnounceMode = "L2"
	// AnnounceBGP advertises each VIP as a host route from every eligible node.
	AnnounceBGP AnnounceMode = "BGP"
	// AnnounceNone leaves reachability to static routes in the network.
	AnnounceNone AnnounceMode = "None"
)

// DataPath says how the nodes carry a group's VIPs' traffic.
// +kubebuilder:validation:Enum=Steering;EntryNode
type DataPath string

const (
	// DataPathSteering means whichever node a flow enters by sends it, unchanged and
	// untracked, to the serving node a consistent hash of the flow picks among the nodes with
	// ready endpoints; that node DNATs it to its own endpoints and the reply goes straight to
	// the client from the VIP. Open connections survive the loss of the node they entered by,
	// and endpoints see the client's address under either traffic policy.
	DataPathSteering DataPath = "Steering"
	// DataPathEntryNode (the default): the node a flow enters by DNATs it to any ready
	// endpoint (and, under externalTrafficPolicy Cluster, masquerades it). It stays the
	// default until steering covers the iptables plane, hairpin traffic and routed nodes.
	// It also suits networks that drop packets whose source is the VIP at a port other than
	// the announcing node's (IP source guard).
	DataPathEntryNode DataPath = "EntryNode"
)

// IPGroupSpec is a pool: its parts (a CIDR segment and/or the CIDRs and ranges
// of addresses, of one or both families) minus excluded addresses, and who may
// use it.
//
// The long CEL rules on addresses (parts do not overlap; excludedIPs touch a
// part) are written by hack/ipgroupcel (make generate), which says how they
// compare addresses: edit it, not the markers.
// +kubebuilder:validation:XValidation:rule="has(self.segment) || (has(self.addresses) && self.addresses.size() > 0)",message="an IPGroup needs a segment or addresses (or both)"
// +kubebuilder:validation:XValidation:rule="!has(self.addresses) || self.addresses.all(i, a, self.addresses.all(j, b, i >= j || !(isCIDR(a) || (a.contains('-') && isIP(a.substring(0, a.indexOf('-')).trim()) && isIP(a.substring(a.indexOf('-') + 1).trim()))) || !(isCIDR(b) || (b.contains('-') && isIP(b.substring(0, b.indexOf('-')).trim()) && isIP(b.substring(b.indexOf('-') + 1).trim()))) || !(isCIDR(a) ? (isCIDR(b) ? (cidr(a).containsCIDR(b) || cidr(b).containsCIDR(a)) : (ip(b.substring(0, b.indexOf('-')).trim()).family() == cidr(a).ip().family() && (cidr(a).containsIP(b.substring(0, b.indexOf('-')).trim()) || cidr(a).containsIP(b.substring(b.indexOf('-') + 1).trim()) || (cidr(b.substring(0, b.indexOf('-')).trim() + (b.substring(0, b.indexOf('-')).trim().contains(':') ? '/112' : '/8')).containsIP(a.substring(0, a.indexOf('/'))) && (b.substring(0, b.indexOf('-')).trim().contains(':') ? (b.substring(0, b.indexOf('-')).trim().lowerAscii().substring(b.substring(0, b.indexOf('-')).trim().lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + b.substring(0, b.indexOf('-')).trim().lowerAscii().substring(b.substring(0, b.indexOf('-')).trim().lastIndexOf(':') + 1)).substring(b.substring(0, b.indexOf('-')).trim().lowerAscii().substring(b.substring(0, b.indexOf('-')).trim().lastIndexOf(':') + 1).size() - 1)) <= (a.substring(0, a.indexOf('/')).lowerAscii().substring(a.substring(0, a.indexOf('/')).lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + a.substring(0, a.indexOf('/')).lowerAscii().substring(a.substring(0, a.indexOf('/')).lastIndexOf(':') + 1)).substring(a.substring(0, a.indexOf('/')).lowerAscii().substring(a.substring(0, a.indexOf('/')).lastIndexOf(':') + 1).size() - 1)) : (int(b.substring(0, b.indexOf('-')).trim().split('.')[0]) * 16777216 + int(b.substring(0, b.indexOf('-')).trim().split('.')[1]) * 65536 + int(b.substring(0, b.indexOf('-')).trim().split('.')[2]) * 256 + int(b.substring(0, b.indexOf('-')).trim().split('.')[3])) <= (int(a.substring(0, a.indexOf('/')).split('.')[0]) * 16777216 + int(a.substring(0, a.indexOf('/')).split('.')[1]) * 65536 + int(a.substring(0, a.indexOf('/')).split('.')[2]) * 256 + int(a.substring(0, a.indexOf('/')).split('.')[3]))) && (a.substring(0, a.indexOf('/')).contains(':') ? (a.substring(0, a.indexOf('/')).lowerAscii().substring(a.substring(0, a.indexOf('/')).lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + a.substring(0, a.indexOf('/')).lowerAscii().substring(a.substring(0, a.indexOf('/')).lastIndexOf(':') + 1)).substring(a.substring(0, a.indexOf('/')).lowerAscii().substring(a.substring(0, a.indexOf('/')).lastIndexOf(':') + 1).size() - 1)) <= (b.substring(b.indexOf('-') + 1).trim().lowerAscii().substring(b.substring(b.indexOf('-') + 1).trim().lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + b.substring(b.indexOf('-') + 1).trim().lowerAscii().substring(b.substring(b.indexOf('-') + 1).trim().lastIndexOf(':') + 1)).substring(b.substring(b.indexOf('-') + 1).trim().lowerAscii().substring(b.substring(b.indexOf('-') + 1).trim().lastIndexOf(':') + 1).size() - 1)) : (int(a.substring(0, a.indexOf('/')).split('.')[0]) * 16777216 + int(a.substring(0, a.indexOf('/')).split('.')[1]) * 65536 + int(a.substring(0, a.indexOf('/')).split('.')[2]) * 256 + int(a.substring(0, a.indexOf('/')).split('.')[3])) <= (int(b.substring(b.indexOf('-') + 1).trim().split('.')[0]) * 16777216 + int(b.substring(b.indexOf('-') + 1).trim().split('.')[1]) * 65536 + int(b.substring(b.indexOf('-') + 1).trim().split('.')[2]) * 256 + int(b.substring(b.indexOf('-') + 1).trim().split('.')[3]))))))) : (isCIDR(b) ? (ip(a.substring(0, a.indexOf('-')).trim()).family() == cidr(b).ip().family() && (cidr(b).containsIP(a.substring(0, a.indexOf('-')).trim()) || cidr(b).containsIP(a.substring(a.indexOf('-') + 1).trim()) || (cidr(a.substring(0, a.indexOf('-')).trim() + (a.substring(0, a.indexOf('-')).trim().contains(':') ? '/112' : '/8')).containsIP(b.substring(0, b.indexOf('/'))) && (a.substring(0, a.indexOf('-')).trim().contains(':') ? (a.substring(0, a.indexOf('-')).trim().lowerAscii().substring(a.substring(0, a.indexOf('-')).trim().lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + a.substring(0, a.indexOf('-')).trim().lowerAscii().substring(a.substring(0, a.indexOf('-')).trim().lastIndexOf(':') + 1)).substring(a.substring(0, a.indexOf('-')).trim().lowerAscii().substring(a.substring(0, a.indexOf('-')).trim().lastIndexOf(':') + 1).size() - 1)) <= (b.substring(0, b.indexOf('/')).lowerAscii().substring(b.substring(0, b.indexOf('/')).lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + b.substring(0, b.indexOf('/')).lowerAscii().substring(b.substring(0, b.indexOf('/')).lastIndexOf(':') + 1)).substring(b.substring(0, b.indexOf('/')).lowerAscii().substring(b.substring(0, b.indexOf('/')).lastIndexOf(':') + 1).size() - 1)) : (int(a.substring(0, a.indexOf('-')).trim().split('.')[0]) * 16777216 + int(a.substring(0, a.indexOf('-')).trim().split('.')[1]) * 65536 + int(a.substring(0, a.indexOf('-')).trim().split('.')[2]) * 256 + int(a.substring(0, a.indexOf('-')).trim().split('.')[3])) <= (int(b.substring(0, b.indexOf('/')).split('.')[0]) * 16777216 + int(b.substring(0, b.indexOf('/')).split('.')[1]) * 65536 + int(b.substring(0, b.indexOf('/')).split('.')[2]) * 256 + int(b.substring(0, b.indexOf('/')).split('.')[3]))) && (b.substring(0, b.indexOf('/')).contains(':') ? (b.substring(0, b.indexOf('/')).lowerAscii().substring(b.substring(0, b.indexOf('/')).lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + b.substring(0, b.indexOf('/')).lowerAscii().substring(b.substring(0, b.indexOf('/')).lastIndexOf(':') + 1)).substring(b.substring(0, b.indexOf('/')).lowerAscii().substring(b.substring(0, b.indexOf('/')).lastIndexOf(':') + 1).size() - 1)) <= (a.substring(a.indexOf('-') + 1).trim().lowerAscii().substring(a.substring(a.indexOf('-') + 1).trim().lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + a.substring(a.indexOf('-') + 1).trim().lowerAscii().substring(a.substring(a.indexOf('-') + 1).trim().lastIndexOf(':') + 1)).substring(a.substring(a.indexOf('-') + 1).trim().lowerAscii().substring(a.substring(a.indexOf('-') + 1).trim().lastIndexOf(':') + 1).size() - 1)) : (int(b.substring(0, b.indexOf('/')).split('.')[0]) * 16777216 + int(b.substring(0, b.indexOf('/')).split('.')[1]) * 65536 + int(b.substring(0, b.indexOf('/')).split('.')[2]) * 256 + int(b.substring(0, b.indexOf('/')).split('.')[3])) <= (int(a.substring(a.indexOf('-') + 1).trim().split('.')[0]) * 16777216 + int(a.substring(a.indexOf('-') + 1).trim().split('.')[1]) * 65536 + int(a.substring(a.indexOf('-') + 1).trim().split('.')[2]) * 256 + int(a.substring(a.indexOf('-') + 1).trim().split('.')[3])))))) : (ip(a.substring(0, a.indexOf('-')).trim()).family() == ip(b.substring(0, b.indexOf('-')).trim()).family() && cidr(a.substring(0, a.indexOf('-')).trim() + (a.substring(0, a.indexOf('-')).trim().contains(':') ? '/112' : '/8')).containsIP(b.substring(0, b.indexOf('-')).trim()) && (a.substring(0, a.indexOf('-')).trim().contains(':') ? (a.substring(0, a.indexOf('-')).trim().lowerAscii().substring(a.substring(0, a.indexOf('-')).trim().lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + a.substring(0, a.indexOf('-')).trim().lowerAscii().substring(a.substring(0, a.indexOf('-')).trim().lastIndexOf(':') + 1)).substring(a.substring(0, a.indexOf('-')).trim().lowerAscii().substring(a.substring(0, a.indexOf('-')).trim().lastIndexOf(':') + 1).size() - 1)) <= (b.substring(b.indexOf('-') + 1).trim().lowerAscii().substring(b.substring(b.indexOf('-') + 1).trim().lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + b.substring(b.indexOf('-') + 1).trim().lowerAscii().substring(b.substring(b.indexOf('-') + 1).trim().lastIndexOf(':') + 1)).substring(b.substring(b.indexOf('-') + 1).trim().lowerAscii().substring(b.substring(b.indexOf('-') + 1).trim().lastIndexOf(':') + 1).size() - 1)) : (int(a.substring(0, a.indexOf('-')).trim().split('.')[0]) * 16777216 + int(a.substring(0, a.indexOf('-')).trim().split('.')[1]) * 65536 + int(a.substring(0, a.indexOf('-')).trim().split('.')[2]) * 256 + int(a.substring(0, a.indexOf('-')).trim().split('.')[3])) <= (int(b.substring(b.indexOf('-') + 1).trim().split('.')[0]) * 16777216 + int(b.substring(b.indexOf('-') + 1).trim().split('.')[1]) * 65536 + int(b.substring(b.indexOf('-') + 1).trim().split('.')[2]) * 256 + int(b.substring(b.indexOf('-') + 1).trim().split('.')[3]))) && (b.substring(0, b.indexOf('-')).trim().contains(':') ? (b.substring(0, b.indexOf('-')).trim().lowerAscii().substring(b.substring(0, b.indexOf('-')).trim().lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + b.substring(0, b.indexOf('-')).trim().lowerAscii().substring(b.substring(0, b.indexOf('-')).trim().lastIndexOf(':') + 1)).substring(b.substring(0, b.indexOf('-')).trim().lowerAscii().substring(b.substring(0, b.indexOf('-')).trim().lastIndexOf(':') + 1).size() - 1)) <= (a.substring(a.indexOf('-') + 1).trim().lowerAscii().substring(a.substring(a.indexOf('-') + 1).trim().lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + a.substring(a.indexOf('-') + 1).trim().lowerAscii().substring(a.substring(a.indexOf('-') + 1).trim().lastIndexOf(':') + 1)).substring(a.substring(a.indexOf('-') + 1).trim().lowerAscii().substring(a.substring(a.indexOf('-') + 1).trim().lastIndexOf(':') + 1).size() - 1)) : (int(b.substring(0, b.indexOf('-')).trim().split('.')[0]) * 16777216 + int(b.substring(0, b.indexOf('-')).trim().split('.')[1]) * 65536 + int(b.substring(0, b.indexOf('-')).trim().split('.')[2]) * 256 + int(b.substring(0, b.indexOf('-')).trim().split('.')[3])) <= (int(a.substring(a.indexOf('-') + 1).trim().split('.')[0]) * 16777216 + int(a.substring(a.indexOf('-') + 1).trim().split('.')[1]) * 65536 + int(a.substring(a.indexOf('-') + 1).trim().split('.')[2]) * 256 + int(a.substring(a.indexOf('-') + 1).trim().split('.')[3]))))))))",message="addresses entries must not overlap each other: list every address once"
// +kubebuilder:validation:XValidation:rule="!has(self.addresses) || !has(self.segment) || !isCIDR(self.segment) || self.addresses.all(a, !(isCIDR(a) || (a.contains('-') && isIP(a.substring(0, a.indexOf('-')).trim()) && isIP(a.substring(a.indexOf('-') + 1).trim()))) || !(isCIDR(self.segment) ? (isCIDR(a) ? (cidr(self.segment).containsCIDR(a) || cidr(a).containsCIDR(self.segment)) : (ip(a.substring(0, a.indexOf('-')).trim()).family() == cidr(self.segment).ip().family() && (cidr(self.segment).containsIP(a.substring(0, a.indexOf('-')).trim()) || cidr(self.segment).containsIP(a.substring(a.indexOf('-') + 1).trim()) || (cidr(a.substring(0, a.indexOf('-')).trim() + (a.substring(0, a.indexOf('-')).trim().contains(':') ? '/112' : '/8')).containsIP(self.segment.substring(0, self.segment.indexOf('/'))) && (a.substring(0, a.indexOf('-')).trim().contains(':') ? (a.substring(0, a.indexOf('-')).trim().lowerAscii().substring(a.substring(0, a.indexOf('-')).trim().lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + a.substring(0, a.indexOf('-')).trim().lowerAscii().substring(a.substring(0, a.indexOf('-')).trim().lastIndexOf(':') + 1)).substring(a.substring(0, a.indexOf('-')).trim().lowerAscii().substring(a.substring(0, a.indexOf('-')).trim().lastIndexOf(':') + 1).size() - 1)) <= (self.segment.substring(0, self.segment.indexOf('/')).lowerAscii().substring(self.segment.substring(0, self.segment.indexOf('/')).lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + self.segment.substring(0, self.segment.indexOf('/')).lowerAscii().substring(self.segment.substring(0, self.segment.indexOf('/')).lastIndexOf(':') + 1)).substring(self.segment.substring(0, self.segment.indexOf('/')).lowerAscii().substring(self.segment.substring(0, self.segment.indexOf('/')).lastIndexOf(':') + 1).size() - 1)) : (int(a.substring(0, a.indexOf('-')).trim().split('.')[0]) * 16777216 + int(a.substring(0, a.indexOf('-')).trim().split('.')[1]) * 65536 + int(a.substring(0, a.indexOf('-')).trim().split('.')[2]) * 256 + int(a.substring(0, a.indexOf('-')).trim().split('.')[3])) <= (int(self.segment.substring(0, self.segment.indexOf('/')).split('.')[0]) * 16777216 + int(self.segment.substring(0, self.segment.indexOf('/')).split('.')[1]) * 65536 + int(self.segment.substring(0, self.segment.indexOf('/')).split('.')[2]) * 256 + int(self.segment.substring(0, self.segment.indexOf('/')).split('.')[3]))) && (self.segment.substring(0, self.segment.indexOf('/')).contains(':') ? (self.segment.substring(0, self.segment.indexOf('/')).lowerAscii().substring(self.segment.substring(0, self.segment.indexOf('/')).lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + self.segment.substring(0, self.segment.indexOf('/')).lowerAscii().substring(self.segment.substring(0, self.segment.indexOf('/')).lastIndexOf(':') + 1)).substring(self.segment.substring(0, self.segment.indexOf('/')).lowerAscii().substring(self.segment.substring(0, self.segment.indexOf('/')).lastIndexOf(':') + 1).size() - 1)) <= (a.substring(a.indexOf('-') + 1).trim().lowerAscii().substring(a.substring(a.indexOf('-') + 1).trim().lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + a.substring(a.indexOf('-') + 1).trim().lowerAscii().substring(a.substring(a.indexOf('-') + 1).trim().lastIndexOf(':') + 1)).substring(a.substring(a.indexOf('-') + 1).trim().lowerAscii().substring(a.substring(a.indexOf('-') + 1).trim().lastIndexOf(':') + 1).size() - 1)) : (int(self.segment.substring(0, self.segment.indexOf('/')).split('.')[0]) * 16777216 + int(self.segment.substring(0, self.segment.indexOf('/')).split('.')[1]) * 65536 + int(self.segment.substring(0, self.segment.indexOf('/')).split('.')[2]) * 256 + int(self.segment.substring(0, self.segment.indexOf('/')).split('.')[3])) <= (int(a.substring(a.indexOf('-') + 1).trim().split('.')[0]) * 16777216 + int(a.substring(a.indexOf('-') + 1).trim().split('.')[1]) * 65536 + int(a.substring(a.indexOf('-') + 1).trim().split('.')[2]) * 256 + int(a.substring(a.indexOf('-') + 1).trim().split('.')[3]))))))) : (isCIDR(a) ? (ip(self.segment.substring(0, self.segment.indexOf('-')).trim()).family() == cidr(a).ip().family() && (cidr(a).containsIP(self.segment.substring(0, self.segment.indexOf('-')).trim()) || cidr(a).containsIP(self.segment.substring(self.segment.indexOf('-') + 1).trim()) || (cidr(self.segment.substring(0, self.segment.indexOf('-')).trim() + (self.segment.substring(0, self.segment.indexOf('-')).trim().contains(':') ? '/112' : '/8')).containsIP(a.substring(0, a.indexOf('/'))) && (self.segment.substring(0, self.segment.indexOf('-')).trim().contains(':') ? (self.segment.substring(0, self.segment.indexOf('-')).trim().lowerAscii().substring(self.segment.substring(0, self.segment.indexOf('-')).trim().lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + self.segment.substring(0, self.segment.indexOf('-')).trim().lowerAscii().substring(self.segment.substring(0, self.segment.indexOf('-')).trim().lastIndexOf(':') + 1)).substring(self.segment.substring(0, self.segment.indexOf('-')).trim().lowerAscii().substring(self.segment.substring(0, self.segment.indexOf('-')).trim().lastIndexOf(':') + 1).size() - 1)) <= (a.substring(0, a.indexOf('/')).lowerAscii().substring(a.substring(0, a.indexOf('/')).lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + a.substring(0, a.indexOf('/')).lowerAscii().substring(a.substring(0, a.indexOf('/')).lastIndexOf(':') + 1)).substring(a.substring(0, a.indexOf('/')).lowerAscii().substring(a.substring(0, a.indexOf('/')).lastIndexOf(':') + 1).size() - 1)) : (int(self.segment.substring(0, self.segment.indexOf('-')).trim().split('.')[0]) * 16777216 + int(self.segment.substring(0, self.segment.indexOf('-')).trim().split('.')[1]) * 65536 + int(self.segment.substring(0, self.segment.indexOf('-')).trim().split('.')[2]) * 256 + int(self.segment.substring(0, self.segment.indexOf('-')).trim().split('.')[3])) <= (int(a.substring(0, a.indexOf('/')).split('.')[0]) * 16777216 + int(a.substring(0, a.indexOf('/')).split('.')[1]) * 65536 + int(a.substring(0, a.indexOf('/')).split('.')[2]) * 256 + int(a.substring(0, a.indexOf('/')).split('.')[3]))) && (a.substring(0, a.indexOf('/')).contains(':') ? (a.substring(0, a.indexOf('/')).lowerAscii().substring(a.substring(0, a.indexOf('/')).lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + a.substring(0, a.indexOf('/')).lowerAscii().substring(a.substring(0, a.indexOf('/')).lastIndexOf(':') + 1)).substring(a.substring(0, a.indexOf('/')).lowerAscii().substring(a.substring(0, a.indexOf('/')).lastIndexOf(':') + 1).size() - 1)) <= (self.segment.substring(self.segment.indexOf('-') + 1).trim().lowerAscii().substring(self.segment.substring(self.segment.indexOf('-') + 1).trim().lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + self.segment.substring(self.segment.indexOf('-') + 1).trim().lowerAscii().substring(self.segment.substring(self.segment.indexOf('-') + 1).trim().lastIndexOf(':') + 1)).substring(self.segment.substring(self.segment.indexOf('-') + 1).trim().lowerAscii().substring(self.segment.substring(self.segment.indexOf('-') + 1).trim().lastIndexOf(':') + 1).size() - 1)) : (int(a.substring(0, a.indexOf('/')).split('.')[0]) * 16777216 + int(a.substring(0, a.indexOf('/')).split('.')[1]) * 65536 + int(a.substring(0, a.indexOf('/')).split('.')[2]) * 256 + int(a.substring(0, a.indexOf('/')).split('.')[3])) <= (int(self.segment.substring(self.segment.indexOf('-') + 1).trim().split('.')[0]) * 16777216 + int(self.segment.substring(self.segment.indexOf('-') + 1).trim().split('.')[1]) * 65536 + int(self.segment.substring(self.segment.indexOf('-') + 1).trim().split('.')[2]) * 256 + int(self.segment.substring(self.segment.indexOf('-') + 1).trim().split('.')[3])))))) : (ip(self.segment.substring(0, self.segment.indexOf('-')).trim()).family() == ip(a.substring(0, a.indexOf('-')).trim()).family() && cidr(self.segment.substring(0, self.segment.indexOf('-')).trim() + (self.segment.substring(0, self.segment.indexOf('-')).trim().contains(':') ? '/112' : '/8')).containsIP(a.substring(0, a.indexOf('-')).trim()) && (self.segment.substring(0, self.segment.indexOf('-')).trim().contains(':') ? (self.segment.substring(0, self.segment.indexOf('-')).trim().lowerAscii().substring(self.segment.substring(0, self.segment.indexOf('-')).trim().lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + self.segment.substring(0, self.segment.indexOf('-')).trim().lowerAscii().substring(self.segment.substring(0, self.segment.indexOf('-')).trim().lastIndexOf(':') + 1)).substring(self.segment.substring(0, self.segment.indexOf('-')).trim().lowerAscii().substring(self.segment.substring(0, self.segment.indexOf('-')).trim().lastIndexOf(':') + 1).size() - 1)) <= (a.substring(a.indexOf('-') + 1).trim().lowerAscii().substring(a.substring(a.indexOf('-') + 1).trim().lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + a.substring(a.indexOf('-') + 1).trim().lowerAscii().substring(a.substring(a.indexOf('-') + 1).trim().lastIndexOf(':') + 1)).substring(a.substring(a.indexOf('-') + 1).trim().lowerAscii().substring(a.substring(a.indexOf('-') + 1).trim().lastIndexOf(':') + 1).size() - 1)) : (int(self.segment.substring(0, self.segment.indexOf('-')).trim().split('.')[0]) * 16777216 + int(self.segment.substring(0, self.segment.indexOf('-')).trim().split('.')[1]) * 65536 + int(self.segment.substring(0, self.segment.indexOf('-')).trim().split('.')[2]) * 256 + int(self.segment.substring(0, self.segment.indexOf('-')).trim().split('.')[3])) <= (int(a.substring(a.indexOf('-') + 1).trim().split('.')[0]) * 16777216 + int(a.substring(a.indexOf('-') + 1).trim().split('.')[1]) * 65536 + int(a.substring(a.indexOf('-') + 1).trim().split('.')[2]) * 256 + int(a.substring(a.indexOf('-') + 1).trim().split('.')[3]))) && (a.substring(0, a.indexOf('-')).trim().contains(':') ? (a.substring(0, a.indexOf('-')).trim().lowerAscii().substring(a.substring(0, a.indexOf('-')).trim().lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + a.substring(0, a.indexOf('-')).trim().lowerAscii().substring(a.substring(0, a.indexOf('-')).trim().lastIndexOf(':') + 1)).substring(a.substring(0, a.indexOf('-')).trim().lowerAscii().substring(a.substring(0, a.indexOf('-')).trim().lastIndexOf(':') + 1).size() - 1)) <= (self.segment.substring(self.segment.indexOf('-') + 1).trim().lowerAscii().substring(self.segment.substring(self.segment.indexOf('-') + 1).trim().lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + self.segment.substring(self.segment.indexOf('-') + 1).trim().lowerAscii().substring(self.segment.substring(self.segment.indexOf('-') + 1).trim().lastIndexOf(':') + 1)).substring(self.segment.substring(self.segment.indexOf('-') + 1).trim().lowerAscii().substring(self.segment.substring(self.segment.indexOf('-') + 1).trim().lastIndexOf(':') + 1).size() - 1)) : (int(a.substring(0, a.indexOf('-')).trim().split('.')[0]) * 16777216 + int(a.substring(0, a.indexOf('-')).trim().split('.')[1]) * 65536 + int(a.substring(0, a.indexOf('-')).trim().split('.')[2]) * 256 + int(a.substring(0, a.indexOf('-')).trim().split('.')[3])) <= (int(self.segment.substring(self.segment.indexOf('-') + 1).trim().split('.')[0]) * 16777216 + int(self.segment.substring(self.segment.indexOf('-') + 1).trim().split('.')[1]) * 65536 + int(self.segment.substring(self.segment.indexOf('-') + 1).trim().split('.')[2]) * 256 + int(self.segment.substring(self.segment.indexOf('-') + 1).trim().split('.')[3])))))))",message="addresses entries must not overlap the segment: list every address once"
// +kubebuilder:validation:XValidation:rule="!has(self.excludedIPs) || (has(self.segment) && !isCIDR(self.segment)) || self.excludedIPs.all(e, !(isIP(e) || isCIDR(e)) || (has(self.segment) && (isIP(e) ? cidr(self.segment).containsIP(e) : (cidr(self.segment).containsCIDR(e) || cidr(e).containsCIDR(self.segment)))) || (has(self.addresses) && self.addresses.exists(a, (isCIDR(a) ? (isIP(e) ? cidr(a).containsIP(e) : (cidr(a).containsCIDR(e) || cidr(e).containsCIDR(a))) : (a.contains('-') && (isIP(e) ? cidr(a.substring(0, a.indexOf('-')).trim() + (a.substring(0, a.indexOf('-')).trim().contains(':') ? '/112' : '/8')).containsIP(e) : cidr(a.substring(0, a.indexOf('-')).trim() + (a.substring(0, a.indexOf('-')).trim().contains(':') ? '/112' : '/8')).containsCIDR(e)))))))",message="every excludedIPs entry must be inside the segment or one of the addresses (an IP, or a CIDR that overlaps one)"
// +kubebuilder:validation:XValidation:rule="!has(self.announce) || !has(self.announce.bgp) || !has(self.segment) || !isCIDR(self.segment) || (cidr(self.segment).ip().family() == 4 ? (!has(self.announce.bgp.aggregationLength) || self.announce.bgp.aggregationLength >= cidr(self.segment).prefixLength()) : (!has(self.announce.bgp.aggregationLengthV6) || self.announce.bgp.aggregationLengthV6 >= cidr(self.segment).prefixLength()))",message="announce.bgp.aggregationLength (aggregationLengthV6 for IPv6) must not be shorter than the segment's prefix: a route wider than the group would draw traffic for addresses outside it"
// +kubebuilder:validation:XValidation:rule="!has(self.announce) || !has(self.announce.bgp) || !has(self.addresses) || self.addresses.all(a, !isCIDR(a) || (cidr(a).ip().family() == 4 ? (!has(self.announce.bgp.aggregationLength) || self.announce.bgp.aggregationLength >= cidr(a).prefixLength()) : (!has(self.announce.bgp.aggregationLengthV6) || self.announce.bgp.aggregationLengthV6 >= cidr(a).prefixLength())))",message="announce.bgp.aggregationLength (aggregationLengthV6 for IPv6) must not be shorter than the prefix of any addresses entry of its family: a route wider than the group would draw traffic for addresses outside it"
type IPGroupSpec struct {
	// Segment is the CIDR the group hands addresses out of, IPv4 or IPv6, written
	// as its network address, e.g. 192.0.2.0/24 or 2001:db8:1::/64.
	// A group needs a segment or addresses (or both).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="segment must be a CIDR such as 192.0.2.0/24 or 2001:db8::/64 (IPv4-mapped IPv6 such as ::ffff:c000:200/120 is not accepted: write the IPv4 segment)"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || cidr(self) == cidr(self).masked()",message="segment must be written as its network address (host bits zero), e.g. 192.0.2.0/24"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || (cidr(self).ip().family() == 4 ? cidr(self).prefixLength() >= 8 : cidr(self).prefixLength() >= 16)",messageExpression="'segment ' + self + ' is too wide to be a VIP pool: the shortest prefix is /8 for IPv4 and /16 for IPv6; split it into smaller groups such as 10.0.0.0/8'"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || (!cidr(self).containsIP('0.0.0.0') && !cidr(self).containsIP('::') && !cidr('0.0.0.0/8').containsCIDR(self))",messageExpression="'segment ' + self + ' holds the unspecified address (0.0.0.0/8 or ::), which no host can be reached at; use a routable segment such as 192.0.2.0/24 or 2001:db8::/64'"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || (!cidr('127.0.0.0/8').containsCIDR(self) && !cidr(self).containsIP('::1'))",messageExpression="'segment ' + self + ' holds loopback addresses (127.0.0.0/8 or ::1), which every node answers itself; use a routable segment such as 192.0.2.0/24'"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || (!cidr('224.0.0.0/4').containsCIDR(self) && !cidr(self).containsCIDR('224.0.0.0/4') && !cidr('ff00::/8').containsCIDR(self))",messageExpression="'segment ' + self + ' holds multicast addresses (224.0.0.0/4 or ff00::/8), which are never a unicast VIP; use a routable segment such as 192.0.2.0/24'"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || (!cidr('169.254.0.0/16').containsCIDR(self) && !cidr(self).containsCIDR('169.254.0.0/16') && !cidr('fe80::/10').containsCIDR(self))",messageExpression="'segment ' + self + ' holds link-local addresses (169.254.0.0/16, with the cloud metadata address, or fe80::/10), which routers never forward; use a routable segment such as 192.0.2.0/24'"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || (!cidr(self).containsIP('255.255.255.255'))",messageExpression="'segment ' + self + ' holds the limited broadcast address 255.255.255.255, which every host on the link receives; use a routable segment such as 192.0.2.0/24'"
	// +kubebuilder:validation:XValidation:rule="!(self.contains(':') && self.contains('.'))",messageExpression="'segment ' + self + ' is an IPv4-mapped (or -compatible) IPv6 prefix, which IPv6 never routes to a host; write the IPv4 segment itself, such as 192.0.2.0/24'"
	Segment string `json:"segment,omitempty"`

	// Addresses are the group's other parts, next to or instead of the segment,
	// written as MetalLB's IPAddressPool writes them: CIDRs (192.0.2.0/28,
	// 2001:db8::/120, written as their network address) and inclusive ranges
	// start-end (192.0.2.20-192.0.2.30). IPv4 and IPv6 parts may be mixed: a
	// dual-stack Service then gets one address of each family from the group.
	// Parts may not overlap each other or the segment; each has the segment's
	// refusals (unspecified, loopback, multicast, link-local, broadcast,
	// IPv4-mapped), a CIDR is at most a /8 (IPv4) or /16 (IPv6) and a range
	// lies within one. excludedIPs applies to every part.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=90
	// +kubebuilder:validation:items:XValidation:rule="(isCIDR(self) || (self.contains('-') && isIP(self.substring(0, self.indexOf('-')).trim()) && isIP(self.substring(self.indexOf('-') + 1).trim())))",message="each addresses entry is a CIDR such as 192.0.2.0/28 or 2001:db8::/120, or a range start-end such as 192.0.2.20-192.0.2.30"
	// +kubebuilder:validation:items:XValidation:rule="!(self.contains(':') && self.contains('.'))",messageExpression="'addresses entry ' + self + ' is IPv4-mapped (or -compatible) IPv6, which IPv6 never routes to a host; write the IPv4 addresses themselves, such as 192.0.2.0/28'"
	// +kubebuilder:validation:items:XValidation:rule="!isCIDR(self) || cidr(self) == cidr(self).masked()",messageExpression="'addresses entry ' + self + ' must be written as its network address (host bits zero), e.g. 192.0.2.0/28'"
	// +kubebuilder:validation:items:XValidation:rule="!isCIDR(self) || (cidr(self).ip().family() == 4 ? cidr(self).prefixLength() >= 8 : cidr(self).prefixLength() >= 16)",messageExpression="'addresses entry ' + self + ' is too wide to be a VIP pool: the shortest prefix is /8 for IPv4 and /16 for IPv6; split it'"
	// +kubebuilder:validation:items:XValidation:rule="!(self.contains('-') && isIP(self.substring(0, self.indexOf('-')).trim()) && isIP(self.substring(self.indexOf('-') + 1).trim())) || ip(self.substring(0, self.indexOf('-')).trim()).family() == ip(self.substring(self.indexOf('-') + 1).trim()).family()",messageExpression="'addresses entry ' + self + ' mixes IPv4 and IPv6: a range is of one family'"
	// +kubebuilder:validation:items:XValidation:rule="!(self.contains('-') && isIP(self.substring(0, self.indexOf('-')).trim()) && isIP(self.substring(self.indexOf('-') + 1).trim())) || !(ip(self.substring(0, self.indexOf('-')).trim()).family() == ip(self.substring(self.indexOf('-') + 1).trim()).family()) || cidr(self.substring(0, self.indexOf('-')).trim() + (self.substring(0, self.indexOf('-')).trim().contains(':') ? '/112' : '/8')).masked() == cidr(self.substring(self.indexOf('-') + 1).trim() + (self.substring(self.indexOf('-') + 1).trim().contains(':') ? '/112' : '/8')).masked()",messageExpression="'addresses entry ' + self + ' is too wide for a range: an IPv4 range lies within one /8, an IPv6 range within one /112 (65536 addresses); split it, or write a CIDR'"
	// +kubebuilder:validation:items:XValidation:rule="!(self.contains('-') && isIP(self.substring(0, self.indexOf('-')).trim()) && isIP(self.substring(self.indexOf('-') + 1).trim())) || !(ip(self.substring(0, self.indexOf('-')).trim()).family() == ip(self.substring(self.indexOf('-') + 1).trim()).family()) || !(cidr(self.substring(0, self.indexOf('-')).trim() + (self.substring(0, self.indexOf('-')).trim().contains(':') ? '/112' : '/8')).masked() == cidr(self.substring(self.indexOf('-') + 1).trim() + (self.substring(self.indexOf('-') + 1).trim().contains(':') ? '/112' : '/8')).masked()) || (self.substring(0, self.indexOf('-')).trim().contains(':') ? (self.substring(0, self.indexOf('-')).trim().lowerAscii().substring(self.substring(0, self.indexOf('-')).trim().lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + self.substring(0, self.indexOf('-')).trim().lowerAscii().substring(self.substring(0, self.indexOf('-')).trim().lastIndexOf(':') + 1)).substring(self.substring(0, self.indexOf('-')).trim().lowerAscii().substring(self.substring(0, self.indexOf('-')).trim().lastIndexOf(':') + 1).size() - 1)) <= (self.substring(self.indexOf('-') + 1).trim().lowerAscii().substring(self.substring(self.indexOf('-') + 1).trim().lastIndexOf(':') + 1).size() == 0 ? '0000' : ('000' + self.substring(self.indexOf('-') + 1).trim().lowerAscii().substring(self.substring(self.indexOf('-') + 1).trim().lastIndexOf(':') + 1)).substring(self.substring(self.indexOf('-') + 1).trim().lowerAscii().substring(self.substring(self.indexOf('-') + 1).trim().lastIndexOf(':') + 1).size() - 1)) : (int(self.substring(0, self.indexOf('-')).trim().split('.')[0]) * 16777216 + int(self.substring(0, self.indexOf('-')).trim().split('.')[1]) * 65536 + int(self.substring(0, self.indexOf('-')).trim().split('.')[2]) * 256 + int(self.substring(0, self.indexOf('-')).trim().split('.')[3])) <= (int(self.substring(self.indexOf('-') + 1).trim().split('.')[0]) * 16777216 + int(self.substring(self.indexOf('-') + 1).trim().split('.')[1]) * 65536 + int(self.substring(self.indexOf('-') + 1).trim().split('.')[2]) * 256 + int(self.substring(self.indexOf('-') + 1).trim().split('.')[3])))",messageExpression="'addresses entry ' + self + ' ends before it starts: write the lower address first'"
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self) ? !(cidr(self).containsIP('0.0.0.0') || cidr(self).containsIP('::') || cidr('0.0.0.0/8').containsCIDR(self)) : (!(self.contains('-') && isIP(self.substring(0, self.indexOf('-')).trim()) && isIP(self.substring(self.indexOf('-') + 1).trim())) || !(cidr('0.0.0.0/8').containsIP(self.substring(0, self.indexOf('-')).trim()) || cidr('::/128').containsIP(self.substring(0, self.indexOf('-')).trim())))",messageExpression="'addresses entry ' + self + ' holds the unspecified address (0.0.0.0/8 or ::), which no host can be reached at; use routable addresses such as 192.0.2.0/28'"
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self) ? !(cidr('127.0.0.0/8').containsCIDR(self) || cidr(self).containsIP('::1')) : (!(self.contains('-') && isIP(self.substring(0, self.indexOf('-')).trim()) && isIP(self.substring(self.indexOf('-') + 1).trim())) || !(cidr('127.0.0.0/8').containsIP(self.substring(0, self.indexOf('-')).trim()) || cidr('::/127').containsIP(self.substring(0, self.indexOf('-')).trim())))",messageExpression="'addresses entry ' + self + ' holds loopback addresses (127.0.0.0/8 or ::1), which every node answers itself; use routable addresses such as 192.0.2.0/28'"
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self) ? !(cidr('224.0.0.0/4').containsCIDR(self) || cidr(self).containsCIDR('224.0.0.0/4') || cidr('ff00::/8').containsCIDR(self)) : (!(self.contains('-') && isIP(self.substring(0, self.indexOf('-')).trim()) && isIP(self.substring(self.indexOf('-') + 1).trim())) || !(cidr('224.0.0.0/4').containsIP(self.substring(0, self.indexOf('-')).trim()) || cidr('ff00::/8').containsIP(self.substring(0, self.indexOf('-')).trim())))",messageExpression="'addresses entry ' + self + ' holds multicast addresses (224.0.0.0/4 or ff00::/8), which are never a unicast VIP; use routable addresses such as 192.0.2.0/28'"
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self) ? !(cidr('169.254.0.0/16').containsCIDR(self) || cidr(self).containsCIDR('169.254.0.0/16') || cidr('fe80::/10').containsCIDR(self)) : (!(self.contains('-') && isIP(self.substring(0, self.indexOf('-')).trim()) && isIP(self.substring(self.indexOf('-') + 1).trim())) || !(cidr('fe80::/10').containsIP(self.substring(0, self.indexOf('-')).trim()) || (cidr('169.0.0.0/8').containsIP(self.substring(0, self.indexOf('-')).trim()) && (int(self.substring(0, self.indexOf('-')).trim().split('.')[0]) * 16777216 + int(self.substring(0, self.indexOf('-')).trim().split('.')[1]) * 65536 + int(self.substring(0, self.indexOf('-')).trim().split('.')[2]) * 256 + int(self.substring(0, self.indexOf('-')).trim().split('.')[3])) <= 2852061183 && 2851995648 <= (int(self.substring(self.indexOf('-') + 1).trim().split('.')[0]) * 16777216 + int(self.substring(self.indexOf('-') + 1).trim().split('.')[1]) * 65536 + int(self.substring(self.indexOf('-') + 1).trim().split('.')[2]) * 256 + int(self.substring(self.indexOf('-') + 1).trim().split('.')[3])))))",messageExpression="'addresses entry ' + self + ' holds link-local addresses (169.254.0.0/16, with the cloud metadata address, or fe80::/10), which routers never forward; use routable addresses such as 192.0.2.0/28'"
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self) ? !(cidr(self).containsIP('255.255.255.255')) : (!(self.contains('-') && isIP(self.substring(0, self.indexOf('-')).trim()) && isIP(self.substring(self.indexOf('-') + 1).trim())) || !(cidr('255.255.255.255/32').containsIP(self.substring(self.indexOf('-') + 1).trim())))",messageExpression="'addresses entry ' + self + ' holds the limited broadcast address 255.255.255.255, which every host on the link receives; use routable addresses such as 192.0.2.0/28'"
	Addresses []string `json:"addresses,omitempty"`

	// AvoidBuggyIPs skips the .0 and .255 address of every IPv4 /24 of the
	// group (MetalLB's avoidBuggyIPs): some old clients and routers take them
	// for a network or broadcast address. They are not counted in capacity.
	// +optional
	AvoidBuggyIPs bool `json:"avoidBuggyIPs,omitempty"`

	// ExcludedIPs are never handed out: single IPs, or CIDRs for ranges. They
	// apply to every part, the segment and the addresses alike; each must lie
	// in (or, a CIDR, overlap) at least one part.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:XValidation:rule="isIP(self) || isCIDR(self)",message="excludedIPs entries must be IPs or CIDRs"
	ExcludedIPs []string `json:"excludedIPs,omitempty"`

	// AutoAssign lets Services that name no group get addresses from this one.
	// Services can still name the group or request one of its addresses when false.
	// +optional
	// +kubebuilder:default=true
	AutoAssign *bool `json:"autoAssign,omitempty"`

	// Priority orders the auto-assign groups: lower is tried first, ties by name.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	Priority int32 `json:"priority,omitempty"`

	// NamespaceSelector limits the group to Services in matching namespaces.
	// Empty or absent: every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// ServiceSelector limits the group to Services whose labels match.
	// Empty or absent: every Service.
	// +optional
	ServiceSelector *metav1.LabelSelector `json:"serviceSelector,omitempty"`

	// Announce says how the group's VIPs are made reachable from outside the nodes.
	// +optional
	// +kubebuilder:default={}
	Announce *Announce `json:"announce,omitempty"`

	// DataPath is how the nodes carry the traffic of the group's VIPs: EntryNode (the
	// default) or Steering (the nftables plane only).
	// +optional
	DataPath DataPath `json:"dataPath,omitempty"`
}

// Steered reports whether the group's VIPs are steered (DataPath Steering).
func (s *IPGroupSpec) Steered() bool { return s.DataPath == DataPathSteering }

// Announce configures how a group's VIPs are announced.
type Announce struct {
	// Mode is L2 (ARP/NDP from one owner node per VIP), BGP (host routes from
	// every eligible node) or None (the network routes the segment statically).
	// +optional
	// +kubebuilder:default=L2
	Mode AnnounceMode `json:"mode,omitempty"`

	// NodeSelector picks the nodes that may carry the group's VIPs, e.g. the
	// nodes on the L2 segment of the group. Absent: every node.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// Interfaces restricts L2 announcement to these interface names.
	// Absent: any interface with an address on the VIP's subnet.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=15
	Interfaces []string `json:"interfaces,omitempty"`

	// BGP settings, used when Mode is BGP.
	// +optional
	BGP *BGPAnnounce `json:"bgp,omitempty"`

	// Gateway is the router, per family, on the group's network that replies to
	// the group's VIPs go back through, on nodes whose default route leaves by
	// another network. Absent: the agent uses a gateway its node's routing
	// table names on that interface, if any.
	// +optional
	Gateway *Gateway `json:"gateway,omitempty"`
}

// Gateway names a router on the group's network, one address per family.
// +kubebuilder:validation:MinProperties=1
type Gateway struct {
	// IPv4 is the IPv4 router, on the subnet of the node's interface.
	// +optional
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:XValidation:rule="isIP(self) && ip(self).family() == 4 && !ip(self).isUnspecified() && !ip(self).isLoopback()",message="gateway.ipv4 must be an IPv4 address such as 192.0.2.1"
	IPv4 string `json:"ipv4,omitempty"`

	// IPv6 is the IPv6 router: an address on the node interface's subnet, or
	// its link-local address (fe80::1).
	// +optional
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self) && ip(self).family() == 6 && !ip(self).isUnspecified() && !ip(self).isLoopback()",message="gateway.ipv6 must be an IPv6 address such as 2001:db8::1 or fe80::1"
	IPv6 string `json:"ipv6,omitempty"`
}

// BGPAnnounce configures the BGP advertisement of a group's VIPs.
type BGPAnnounce struct {
	// Peers are names of BGPPeer objects to advertise to. Absent: every peer.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	Peers []string `json:"peers,omitempty"`

	// Communities attached to the routes: standard (65000:100) or large (65000:1:2).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Pattern=`^[0-9]+:[0-9]+(:[0-9]+)?$`
	// +kubebuilder:validation:items:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.split(':').size() == 3 ? c.split(':').all(p, int(p) <= 4294967295) : c.split(':').all(p, int(p) <= 65535))",message="a standard community is two numbers of at most 65535 (65000:100); a large one three of at most 4294967295 (65000:1:2)"
	Communities []string `json:"communities,omitempty"`

	// LocalPref attached to the routes (iBGP only).
	// +optional
	LocalPref *uint32 `json:"localPref,omitempty"`

	// AggregationLength makes every node advertise, for the IPv4 VIPs it
	// carries, one covering route of this length (the VIP's /N) instead of
	// a /32 per VIP: fewer routes for fabrics that want one per node. Only
	// Services with externalTrafficPolicy Cluster get addresses from such a
	// group (each node forwards every VIP under the route); a Local Service
	// is refused one (GroupNotAllowed). Not shorter than the segment's
	// prefix. Absent: host routes.
	// +optional
	// +kubebuilder:validation:Minimum=8
	// +kubebuilder:validation:Maximum=32
	AggregationLength *int32 `json:"aggregationLength,omitempty"`

	// AggregationLengthV6 is AggregationLength for the IPv6 VIPs (instead of
	// a /128 per VIP).
	// +optional
	// +kubebuilder:validation:Minimum=16
	// +kubebuilder:validation:Maximum=128
	AggregationLengthV6 *int32 `json:"aggregationLengthV6,omitempty"`
}

// AggregationBits is the length of the covering route a's group advertises
// for vip (0: a host route), by vip's family.
func (a *BGPAnnounce) AggregationBits(vip netip.Addr) int {
	if a == nil {
		return 0
	}
	l := a.AggregationLengthV6
	if vip.Unmap().Is4() {
		l = a.AggregationLength
	}
	if l == nil {
		return 0
	}
	return int(*l)
}

// Aggregates reports whether a's group advertises covering routes for any
// family: such a group serves externalTrafficPolicy Cluster only.
func (a *BGPAnnounce) Aggregates() bool {
	return a != nil && (a.AggregationLength != nil || a.AggregationLengthV6 != nil)
}

// Condition types of an IPGroup.
const (
	// IPGroupReady is True when the group's spec was accepted and it can hand out addresses.
	IPGroupReady = "Ready"
	// IPGroupOverlapping is True when the segment overlaps another group's.
	IPGroupOverlapping = "Overlapping"
	// IPGroupAnnounceable is True when at least one node can announce the
	// group's VIPs in L2 mode (it matches announce.nodeSelector and has an
	// interface on the segment). False means its Services get IPs nobody
	// outside the nodes can reach.
	IPGroupAnnounceable = "Announceable"
	// IPGroupAddressesKept is True when Services keep addresses the ledger
	// records as the group's that the group no longer allows (an excluded
	// address, a shrunk segment, the group being deleted): they keep them
	// until the admin releases them (ReleaseAddressesAnnotation) or deletes
	// the Services. The message counts and names them.
	IPGroupAddressesKept = "AddressesKept"
	// IPGroupReturnPath is about nodes on several networks whose default route
	// leaves by another network than the one the group's VIPs arrive on: True
	// when every such node has a router back on the group's network
	// (announce.gateway, or one its routing table names there), False
	// (ReasonNoRouterBack) naming those without one. Absent when no node that
	// may carry the group's VIPs is on several networks.
	IPGroupReturnPath = "ReturnPath"
	// IPGroupLANHostAnswersMany is True (ReasonOneMACAnswersMany) when one MAC
	// answered the probe for more than a few of the group's addresses
	// (allocator.MaxInUseOnLANPerMAC, the IP objects' InUseOnLAN
	// condition): a router doing proxy ARP, or a hostile host. No Service
	// of the group moves for its answers any more: each keeps its address,
	// marked. The message names the MACs. Absent otherwise.
	IPGroupLANHostAnswersMany = "LANHostAnswersMany"
	// ReasonOneMACAnswersMany is the reason of IPGroupLANHostAnswersMany, and
	// of the Warning Event on the IPGroup when a MAC first passes the bound.
	ReasonOneMACAnswersMany = "OneMACAnswersMany"
)

// Reasons of IPGroupReturnPath.
const (
	// ReasonRouterKnown: every node that needs a way back has a router for it.
	ReasonRouterKnown = "RouterKnown"
	// ReasonNoRouterBack: some node has no router back on the group's network;
	// replies to the VIPs arriving there leave by its default route.
	ReasonNoRouterBack = "NoRouterBack"
)

// Reasons of IPGroupAddressesKept.
const (
	// ReasonNoneKept: every address the ledger records as the group's is one it allows.
	ReasonNoneKept = "NoneKept"
	// ReasonKeptUntilReleased: Services keep addresses the group's spec no
	// longer allows, until the admin releases them.
	ReasonKeptUntilReleased = "KeptUntilReleased"
	// ReasonDeletionBlocked: the group is being deleted and Services still
	// hold its addresses; the finalizer stays until they are released.
	ReasonDeletionBlocked = "DeletionBlocked"
	// ReasonReleasing: the admin released the addresses; their Services move
	// to addresses their groups allow as soon as one is free.
	ReasonReleasing = "Releasing"
)

// AddressesHeldFinalizer protects an IPGroup from which Services hold
// addresses, as a PVC in use is protected: deleting it leaves it Terminating,
// its Services keep their addresses and the agents keep announcing them,
// until the admin releases them (ReleaseAddressesAnnotation) or no Service
// holds one any more.
const AddressesHeldFinalizer = "paas.org/addresses-held"

// ReleaseAddressesAnnotation set to "true" on an IPGroup releases the
// addresses Services hold that the group no longer allows (excluded, outside
// its parts, or all of them when the group is being deleted): their Services
// move to addresses their groups allow, by the usual relocation. Without it,
// such a Service keeps its address: an address moves only when someone asks.
// While it is set, later exclusions move Services at once too.
const ReleaseAddressesAnnotation = "vip.paas.org/release-addresses"

// ReleasesAddresses reports whether the admin released the addresses the
// group no longer allows.
func (g *IPGroup) ReleasesAddresses() bool {
	return g.Annotations[ReleaseAddressesAnnotation] == "true"
}

// IPGroupStatus reports how full the group is and whether it is usable.
type IPGroupStatus struct {
	// Capacity is the number of addresses the group can hand out (the segment
	// minus the excluded addresses). A decimal string: an IPv6 /64 holds 2^64.
	// +optional
	Capacity string `json:"capacity,omitempty"`

	// Allocated is the number of the group's addresses held by Services or legacy VirtualIPs.
	// +optional
	Allocated int64 `json:"allocated"`

	// Available is Capacity minus Allocated minus the reserved addresses no
	// Service holds, as a decimal string.
	// +optional
	Available string `json:"available,omitempty"`

	// Reserved is the number of the group's addresses it does not hand out
	// because they are reserved in the cluster: Nodes' addresses, Service
	// CIDRs, pod CIDRs and, for an L2 group, the network and broadcast
	// addresses of the node subnets it announces on. A decimal string, like
	// Capacity; Available excludes them.
	// +optional
	Reserved string `json:"reserved,omitempty"`

	// InUseOnLAN is the number of the group's addresses a host on the LAN
	// answered for when the L2 owner probed them before their first
	// announcement (the IP objects with condition InUseOnLAN True): never
	// announced nor handed out until a recheck finds them silent or an admin
	// deletes the record. Neither Allocated (unless a Service still asks for
	// one) nor Available counts them.
	// +optional
	InUseOnLAN int64 `json:"inUseOnLAN,omitempty"`

	// Relocating counts the Services (or legacy VirtualIPs) holding an address
	// that the ledger records as this group's but that the group no longer
	// allows: its segment, addresses, excludedIPs or avoidBuggyIPs changed, or
	// the group is being deleted, and they have not moved yet. They keep their
	// addresses until the admin releases them (condition AddressesKept,
	// annotation vip.paas.org/release-addresses), then move as soon as
	// another address is free.
	// It is 0 once a relocation is complete; each such Service's condition
	// vip.paas.org/IPAllocated says why it has not moved.
	// +optional
	Relocating int64 `json:"relocating"`

	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Overlapping, Announceable, AddressesKept.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// IPGroup is a pool of addresses for LoadBalancer Services: a CIDR segment
// and/or a list of CIDRs and ranges (addresses), minus excluded IPs.
//
// The name is the ledger's ipgroup label value, so it must fit one.
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="an IPGroup name is at most 63 characters: it is the value of the ipgroup label on every IP ledger object of the group"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ipg
// +kubebuilder:printcolumn:name="Segment",type=string,JSONPath=`.spec.segment`
// +kubebuilder:printcolumn:name="Addresses",type=string,JSONPath=`.spec.addresses`,priority=1
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.announce.mode`
// +kubebuilder:printcolumn:name="Allocated",type=integer,JSONPath=`.status.allocated`
// +kubebuilder:printcolumn:name="Capacity",type=string,JSONPath=`.status.capacity`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Relocating",type=integer,JSONPath=`.status.relocating`
// +kubebuilder:printcolumn:name="InUseOnLAN",type=integer,JSONPath=`.status.inUseOnLAN`,priority=1
// +kubebuilder:printcolumn:name="Reserved",type=string,JSONPath=`.status.reserved`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IPGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   IPGroupSpec   `json:"spec"`
	Status IPGroupStatus `json:"status,omitempty"`
}

// IPGroupList is a list of IPGroups.
// +kubebuilder:object:root=true
type IPGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPGroup `json:"items"`
}

func init() {
	SchemeBuilder.Register(&IPGroup{}, &IPGroupList{})
}
