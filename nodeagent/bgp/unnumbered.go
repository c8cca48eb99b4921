package bgp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/mdlayher/ndp"
	"github.com/vishvananda/netlink"
	"golang.org/x/net/ipv6"
)

// Unnumbered sessions (a Peer with an Interface) run over the link's IPv6
// link-local addresses, found with IPv6 Router Advertisements as FRR's
// 'neighbor IFACE interface' does: the router advertises itself on the link,
// which puts it in the kernel's neighbour table flagged as a router, where
// routerOn finds it; the router learns the node's link-local address only
// from the node's own advertisements, so the node sends them too. Each says
// router lifetime 0: no host on the link takes the node for a default
// router (RFC 4861, section 4.2), and it carries no prefix. The speaker then
// peers with the router's link-local address, zoned to the interface, as
// with any address: GoBGP's own interface neighbours look the router up
// again to delete one, and cannot once it is gone.

// raEvery is how often the node advertises itself on an unnumbered link:
// the router learns it within this after either side starts.
const raEvery = 3 * time.Second

// linkAdvertisers sends the node's Router Advertisements on the links of
// its unnumbered peers, one goroutine per link, until told otherwise.
type linkAdvertisers struct {
	log     logr.Logger
	mu      sync.Mutex
	running map[string]context.CancelFunc // by interface name
}

func newLinkAdvertisers(log logr.Logger) *linkAdvertisers {
	return &linkAdvertisers{log: log, running: map[string]context.CancelFunc{}}
}

// sync advertises on exactly the interfaces of ifaces.
func (l *linkAdvertisers) sync(ifaces map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, stop := range l.running {
		if !ifaces[name] {
			stop()
			delete(l.running, name)
		}
	}
	for name := range ifaces {
		if _, ok := l.running[name]; ok {
			continue
		}
		ctx, stop := context.WithCancel(context.Background())
		l.running[name] = stop
		go l.advertise(ctx, name)
	}
}

// advertise sends an advertisement on ifname at once and every raEvery
// until ctx ends; an interface not there yet (or without its link-local
// address) is tried again each period.
func (l *linkAdvertisers) advertise(ctx context.Context, ifname string) {
	log := l.log.WithValues("interface", ifname)
	var conn *ndp.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	tick := time.NewTicker(raEvery)
	defer tick.Stop()
	var lastErr string
	for {
		var err error
		if conn == nil {
			conn, err = listenLink(ifname)
		}
		if err == nil {
			err = sendAdvertisement(conn, ifname)
		}
		if _, _, rerr := routerOn(ifname, netip.Addr{}); err == nil && rerr != nil {
			// Ask at once rather than wait for the router's next one.
			err = conn.WriteTo(&ndp.RouterSolicitation{}, &ipv6.ControlMessage{HopLimit: 255}, netip.IPv6LinkLocalAllRouters())
		}
		if err != nil {
			if conn != nil {
				_ = conn.Close()
				conn = nil
			}
			if err.Error() != lastErr {
				log.Info("cannot advertise this node on the link of an unnumbered BGP peer yet", "error", err.Error())
			}
			lastErr = err.Error()
		} else {
			lastErr = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func listenLink(ifname string) (*ndp.Conn, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, err
	}
	conn, _, err := ndp.Listen(ifi, ndp.LinkLocal)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", ifname, err)
	}
	return conn, nil
}

// sendAdvertisement sends one Router Advertisement of lifetime 0, with this
// interface's MAC, to every node on the link. Every other field is left
// unspecified (0), so that no host on the link changes its hop limit or
// timers after it.
func sendAdvertisement(conn *ndp.Conn, ifname string) error {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return err
	}
	ra := &ndp.RouterAdvertisement{}
	if len(ifi.HardwareAddr) > 0 {
		ra.Options = append(ra.Options, &ndp.LinkLayerAddress{Direction: ndp.Source, Addr: ifi.HardwareAddr})
	}
	// Hop limit 255, as RFC 4861 requires of every Neighbor Discovery message.
	return conn.WriteTo(ra, &ipv6.ControlMessage{HopLimit: 255}, netip.IPv6LinkLocalAllNodes())
}

// routerOn is the link-local address, zoned to ifname, of the router an
// unnumbered session on ifname goes to, and which rule accepted it
// (pickRouter): named (the BGPPeer's interfaceRouter), or the one router the
// kernel knows on a point-to-point link (from its Router Advertisements).
func routerOn(ifname string, named netip.Addr) (netip.Addr, string, error) {
	link, err := netlink.LinkByName(ifname)
	if err != nil {
		return netip.Addr{}, "", fmt.Errorf("interface %s: %w", ifname, err)
	}
	neighs, err := netlink.NeighList(link.Attrs().Index, netlink.FAMILY_V6)
	if err != nil {
		return netip.Addr{}, "", fmt.Errorf("neighbours on %s: %w", ifname, err)
	}
	// The node's own Router Advertisements loop back to it, so the kernel
	// may list its own link-local address as a neighbour: not another host.
	own, err := netlink.AddrList(link, netlink.FAMILY_V6)
	if err != nil {
		return netip.Addr{}, "", fmt.Errorf("addresses on %s: %w", ifname, err)
	}
	mine := map[netip.Addr]bool{}
	for _, a := range own {
		if addr, ok := netip.AddrFromSlice(a.IP); ok {
			mine[addr] = true
		}
	}
	l := linkFacts{Name: ifname, PointToPoint: link.Attrs().Flags&net.FlagPointToPoint != 0}
	for _, n := range neighs {
		addr, ok := netip.AddrFromSlice(n.IP)
		if !ok || mine[addr] || !addr.IsLinkLocalUnicast() || n.State&(netlink.NUD_FAILED|netlink.NUD_INCOMPLETE|netlink.NUD_NOARP) != 0 {
			continue
		}
		if n.Flags&netlink.NTF_ROUTER != 0 {
			l.Routers = append(l.Routers, addr)
		} else {
			l.Others = append(l.Others, addr)
		}
	}
	return pickRouter(l, named)
}

// linkFacts is what the kernel knows of a link an unnumbered session runs on.
type linkFacts struct {
	Name         string
	PointToPoint bool         // the interface is flagged point to point
	Routers      []netip.Addr // link-local neighbours that sent Router Advertisements
	Others       []netip.Addr // link-local neighbours that did not
}

// pickRouter chooses the router of an unnumbered session on l: the one
// named, if any (it need not have been heard yet: the session dials it);
// else the one router of a point-to-point link, which is one flagged so or
// one where the node knows no neighbour but that router. Anywhere else any
// host can send a Router Advertisement, and the node would peer with it.
// which says by which rule the router was accepted.
func pickRouter(l linkFacts, named netip.Addr) (router netip.Addr, which string, err error) {
	if named.IsValid() {
		return named.WithZone(l.Name), "the router the BGPPeer names (interfaceRouter)", nil
	}
	switch {
	case len(l.Routers) == 0:
		return netip.Addr{}, "", fmt.Errorf("no router on %s yet: none sent an IPv6 Router Advertisement (FRR sends them for 'neighbor %s interface')", l.Name, l.Name)
	case len(l.Routers) > 1:
		return netip.Addr{}, "", fmt.Errorf("%d routers on %s (%v): an unnumbered session needs a point-to-point link, or the router named (interfaceRouter)", len(l.Routers), l.Name, l.Routers)
	case l.PointToPoint:
		return l.Routers[0].WithZone(l.Name), "the one router of " + l.Name + ", a point-to-point interface", nil
	case len(l.Others) == 0:
		return l.Routers[0].WithZone(l.Name), "the one router of " + l.Name + ", the only neighbour on the link", nil
	}
	return netip.Addr{}, "", fmt.Errorf("router %s on %s shares the link with %d other neighbours (%v): an unnumbered session on a shared link goes only to the router named (interfaceRouter)",
		l.Routers[0], l.Name, len(l.Others), l.Others)
}
