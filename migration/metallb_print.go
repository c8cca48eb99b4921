package migration

import (
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// PrintMetalLBPlan writes p for a person: per MetalLB object what it becomes and what is not
// carried over, with the Services each pool serves and the address each keeps.
func PrintMetalLBPlan(out io.Writer, p MetalLBPlan) {
	fmt.Fprintf(out, "MetalLB in namespace %s: %d IPAddressPools, %d L2Advertisements, %d BGPAdvertisements, %d BGPPeers, %d Communities, %d BFDProfiles\n",
		p.Namespace, p.Counts["IPAddressPool"], p.Counts["L2Advertisement"], p.Counts["BGPAdvertisement"], p.Counts["BGPPeer"], p.Counts["Community"], p.Counts["BFDProfile"])
	for _, g := range p.Groups {
		printGroup(out, p, g)
	}
	for _, c := range p.Peers {
		printPeer(out, c)
	}
	if len(p.Notes) > 0 {
		fmt.Fprintln(out)
		for _, n := range p.Notes {
			fmt.Fprintln(out, n)
		}
	}
	fmt.Fprintln(out)
	if c := p.Controller; c != nil {
		fmt.Fprintf(out, "MetalLB's controller: %s (uid %s); --scale-down-controller scales it, and nothing else, to 0\n", c, c.UID)
	} else {
		fmt.Fprintf(out, "MetalLB's controller: no single Deployment of namespace %s labelled as it; --scale-down-controller scales nothing\n", p.Namespace)
	}
	printList(out, "not touched:", p.NotTouched)
	printList(out, "gossip ports (MetalLB's speakers, the agents):", p.Gossip)
	var orphans []string
	keep, move := 0, 0
	for _, f := range p.Services {
		if f.Keeps {
			keep++
		} else {
			move++
		}
		if f.Pool == "" {
			orphans = append(orphans, describeFate(f))
		}
	}
	if len(orphans) > 0 {
		fmt.Fprintln(out)
		printList(out, "Services in no converted pool:", orphans)
	}
	if len(p.Problems) > 0 {
		fmt.Fprintln(out)
		printList(out, "problems:", p.Problems)
	}
	fmt.Fprintf(out, "\naddresses: %d LoadBalancer Services keep theirs, %d get another\n", keep, move)
}

func printGroup(out io.Writer, p MetalLBPlan, g GroupConversion) {
	s := g.Group.Spec
	fmt.Fprintf(out, "\nIPAddressPool %s -> IPGroup %s\n", g.Pool, g.Group.Name)
	switch {
	case g.Exists:
		fmt.Fprintf(out, "  IPGroup %s exists already, identical: apply leaves it\n", g.Group.Name)
	case g.Conflict != "":
		fmt.Fprintf(out, "  IPGroup %s exists already and differs: apply refuses the pool (see problems)\n", g.Group.Name)
	}
	fmt.Fprintf(out, "  addresses: %s\n", strings.Join(s.Addresses, ", "))
	fmt.Fprintf(out, "  autoAssign: %t, priority: %d", *s.AutoAssign, s.Priority)
	if s.AvoidBuggyIPs {
		fmt.Fprint(out, ", avoidBuggyIPs: true")
	}
	fmt.Fprintln(out)
	if s.NamespaceSelector != nil {
		fmt.Fprintf(out, "  namespaceSelector: %s\n", metav1.FormatLabelSelector(s.NamespaceSelector))
	}
	if s.ServiceSelector != nil {
		fmt.Fprintf(out, "  serviceSelector: %s\n", metav1.FormatLabelSelector(s.ServiceSelector))
	}
	fmt.Fprintf(out, "  announce: %s\n", describeAnnounce(s.Announce, g.AnnouncedBy))
	printList(out, "  not carried over:", g.Dropped)
	var served []string
	for _, f := range p.Services {
		if f.Pool == g.Pool {
			served = append(served, describeFate(f))
		}
	}
	if len(served) == 0 {
		served = []string{"(none)"}
	}
	printList(out, "  Services:", served)
}

func printPeer(out io.Writer, c PeerConversion) {
	if c.Peer == nil {
		fmt.Fprintf(out, "\nBGPPeer %s (%s): not converted\n", c.Name, c.Version)
		printList(out, "  not carried over:", c.Dropped)
		return
	}
	s := c.Peer.Spec
	fmt.Fprintf(out, "\nBGPPeer %s (%s) -> BGPPeer %s\n", c.Name, c.Version, c.Peer.Name)
	fmt.Fprintf(out, "  peer %s:%d AS %d, my AS %d, hold %s, keepalive %s", s.PeerAddress, s.PeerPort, s.PeerASN, s.MyASN, s.HoldTime.Duration, s.KeepaliveTime.Duration)
	if s.EBGPMultiHop != nil {
		fmt.Fprint(out, ", ebgpMultiHop")
	}
	if s.GracefulRestart != nil {
		fmt.Fprint(out, ", gracefulRestart")
	}
	if s.RouterID != "" {
		fmt.Fprintf(out, ", routerID %s", s.RouterID)
	}
	fmt.Fprintln(out)
	if s.NodeSelector != nil {
		fmt.Fprintf(out, "  nodeSelector: %s\n", metav1.FormatLabelSelector(s.NodeSelector))
	}
	if b := s.BFD; b != nil {
		fmt.Fprintf(out, "  bfd: receive %s ms, transmit %s ms, multiplier %s\n", orDefault(b.ReceiveInterval, "300"), orDefault(b.TransmitInterval, "300"), orDefault(b.DetectMultiplier, "3"))
	}
	switch {
	case c.PasswordFrom.Name != "":
		fmt.Fprintf(out, "  password: copied from Secret %s (key password) into Secret %s key %s\n", c.PasswordFrom, MetalLBPasswordSecret, c.Name)
	case c.Password != "":
		fmt.Fprintf(out, "  password: spec.password (plain text) moved into Secret %s key %s\n", MetalLBPasswordSecret, c.Name)
	}
	printList(out, "  not carried over:", c.Dropped)
}

func describeAnnounce(a *paasv1.Announce, by []string) string {
	var b strings.Builder
	b.WriteString(string(a.Mode))
	if len(by) > 0 {
		fmt.Fprintf(&b, " (from %s)", strings.Join(by, ", "))
	}
	if len(a.Interfaces) > 0 {
		fmt.Fprintf(&b, ", interfaces %s", strings.Join(a.Interfaces, ", "))
	}
	if a.NodeSelector != nil {
		fmt.Fprintf(&b, ", nodes %s", metav1.FormatLabelSelector(a.NodeSelector))
	}
	if g := a.BGP; g != nil {
		peers := "every BGPPeer"
		if len(g.Peers) > 0 {
			peers = "BGPPeer " + strings.Join(g.Peers, ", ")
		}
		fmt.Fprintf(&b, ", to %s", peers)
		if len(g.Communities) > 0 {
			fmt.Fprintf(&b, ", communities %s", strings.Join(g.Communities, " "))
		}
		if g.LocalPref != nil {
			fmt.Fprintf(&b, ", localPref %d", *g.LocalPref)
		}
	}
	return b.String()
}

func describeFate(f ServiceFate) string {
	verb := "keeps"
	if !f.Keeps {
		verb = "loses"
	}
	s := fmt.Sprintf("%s %s %s", f.Service, verb, strings.Join(f.Addresses, ", "))
	if f.Note != "" {
		s += ": " + f.Note
	}
	return s
}

func printList(out io.Writer, title string, items []string) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintln(out, title)
	for _, it := range items {
		fmt.Fprintf(out, "%s  %s\n", strings.Repeat(" ", len(title)-len(strings.TrimLeft(title, " "))), it)
	}
}

func orDefault(v *int32, def string) string {
	if v == nil {
		return def
	}
	return fmt.Sprint(*v)
}
