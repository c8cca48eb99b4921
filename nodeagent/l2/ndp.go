package l2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/mdlayher/ndp"
	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// ndpWire is IPv6's wire: one ICMPv6 socket on the interface, bound to its
// link-local address (the source of every NDP message we send), receiving
// only Neighbor Solicitations and Advertisements.
//
// Solicitations for a VIP go to the VIP's solicited-node multicast group, so
// the socket joins that group while the VIP is owned; the kernel then delivers
// them to us (and, the VIP being on no interface, answers none itself).
//
// A host that already knows the VIP's MAC checks it now and then with a
// solicitation sent to the VIP itself (neighbour unreachability detection,
// RFC 4861 7.3). The kernel delivers no packet for an address it does not
// have to any ICMPv6 socket, so a packet socket, filtered in the kernel to
// unicast Neighbor Solicitations, reads those. Unanswered, the host's entry
// would fail after 3 s of probing and be resolved again.
type ndpWire struct {
	ifi     *net.Interface
	conn    *ndp.Conn
	unicast *packet.Conn
	groups  groups

	heard chan readResult // from both sockets
	done  chan struct{}
}

type readResult struct {
	h   heard
	err error
}

func listenNDP(ifi *net.Interface) (*ndpWire, error) {
	conn, _, err := ndp.Listen(ifi, ndp.LinkLocal)
	if err != nil {
		return nil, &net.OpError{Op: "listen ndp", Net: ifi.Name, Err: err}
	}
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeNeighborSolicitation)
	f.Accept(ipv6.ICMPTypeNeighborAdvertisement)
	if err := conn.SetICMPFilter(&f); err != nil {
		_ = conn.Close()
		return nil, &net.OpError{Op: "filter ndp", Net: ifi.Name, Err: err}
	}
	// The hop limit tells on-link senders from forged off-link ones.
	if err := conn.SetControlMessage(ipv6.FlagHopLimit, true); err != nil {
		_ = conn.Close()
		return nil, &net.OpError{Op: "listen ndp", Net: ifi.Name, Err: err}
	}
	unicast, err := packet.Listen(ifi, packet.Datagram, unix.ETH_P_IPV6, &packet.Config{Filter: unicastSolicitations})
	if err != nil {
		_ = conn.Close()
		return nil, &net.OpError{Op: "listen ndp unicast", Net: ifi.Name, Err: err}
	}
	if err := growReadBuffer(unicast); err != nil {
		_ = conn.Close()
		_ = unicast.Close()
		return nil, &net.OpError{Op: "listen ndp unicast", Net: ifi.Name, Err: err}
	}
	w := &ndpWire{ifi: ifi, conn: conn, unicast: unicast, groups: groups{}, heard: make(chan readResult), done: make(chan struct{})}
	go w.pump(w.readMulticast)
	go w.pump(w.readUnicast)
	return w, nil
}

// unicastSolicitations passes IPv6 packets (from their IPv6 header on, as a
// datagram packet socket sees them) that carry ICMPv6 (next header 58, no
// extension header: NDP has none) of type 135, Neighbor Solicitation, to a
// destination that is not multicast (its first byte is not 0xff).
var unicastSolicitations = func() []bpf.RawInstruction {
	prog, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 6, Size: 1}, // next header
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 58, SkipTrue: 5},
		bpf.LoadAbsolute{Off: 24, Size: 1}, // first byte of the destination
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0xff, SkipTrue: 3},
		bpf.LoadAbsolute{Off: 40, Size: 1}, // ICMPv6 type
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(ipv6.ICMPTypeNeighborSolicitation), SkipTrue: 1},
		bpf.RetConstant{Val: 1 << 16},
		bpf.RetConstant{Val: 0},
	})
	if err != nil {
		panic(err) // a constant program
	}
	return prog
}()

// pump hands what read returns to next until the wire closes.
func (w *ndpWire) pump(read func() (heard, error)) {
	for {
		h, err := read()
		select {
		case w.heard <- readResult{h, err}:
		case <-w.done:
			return
		}
	}
}

func (w *ndpWire) protocol() string { return "NDP" }

func (w *ndpWire) next() (heard, error) {
	select {
	case r := <-w.heard:
		return r.h, r.err
	case <-w.done:
		return heard{}, net.ErrClosed
	}
}

// readMulticast reads what the ICMPv6 socket gets: solicitations to the groups
// joined, advertisements to all nodes or to us.
func (w *ndpWire) readMulticast() (heard, error) {
	for {
		m, cm, src, err := w.conn.ReadFrom()
		if err != nil {
			return heard{}, err
		}
		hopLimit := ndp.HopLimit
		if cm != nil {
			hopLimit = cm.HopLimit
		}
		if h, ok := interpretNDP(m, src, hopLimit); ok {
			return h, nil
		}
	}
}

// readUnicast reads the solicitations sent to an address itself.
func (w *ndpWire) readUnicast() (heard, error) {
	b := make([]byte, max(w.ifi.MTU, 1280))
	for {
		n, _, err := w.unicast.ReadFrom(b)
		if err != nil {
			return heard{}, err
		}
		// The socket sees this node's own solicitations on the way out too.
		if h, ok := unicastSolicitation(b[:n]); ok && !bytes.Equal(h.claimer, w.ifi.HardwareAddr) {
			return h, nil
		}
	}
}

// unicastSolicitation reads an IPv6 packet the unicastSolicitations filter
// passed; ok is false when it is no well-formed solicitation from the link.
func unicastSolicitation(b []byte) (heard, bool) {
	const ipv6Header = 40
	if len(b) < ipv6Header || b[0]>>4 != 6 || b[6] != 58 {
		return heard{}, false
	}
	m, err := ndp.ParseMessage(b[ipv6Header:])
	if err != nil {
		return heard{}, false
	}
	if _, ok := m.(*ndp.NeighborSolicitation); !ok {
		return heard{}, false
	}
	return interpretNDP(m, netip.AddrFrom16([16]byte(b[8:24])), int(b[7]))
}

func (w *ndpWire) answer(h heard) error {
	na, dst := advertisement(h.asked, h.packet.(netip.Addr), w.ifi.HardwareAddr)
	return w.conn.WriteTo(na, nil, dst)
}

func (w *ndpWire) announce(vip netip.Addr) error {
	return w.conn.WriteTo(unsolicited(vip, w.ifi.HardwareAddr), nil, netip.IPv6LinkLocalAllNodes())
}

// probe solicits vip as any host resolving it would: whoever has it answers
// to our link-local address, and next hears the claim.
func (w *ndpWire) probe(vip netip.Addr) error {
	ns, dst, err := solicitation(vip, w.ifi.HardwareAddr)
	if err != nil {
		return err
	}
	return w.conn.WriteTo(ns, nil, dst)
}

func (w *ndpWire) start(vip netip.Addr) error {
	group, join, err := w.groups.add(vip)
	if err != nil || !join {
		return err
	}
	if err := w.conn.JoinGroup(group); err != nil {
		w.groups.remove(vip)
		return fmt.Errorf("join %s: %w", group, err)
	}
	return nil
}

func (w *ndpWire) stop(vip netip.Addr) error {
	group, leave := w.groups.remove(vip)
	if !leave {
		return nil
	}
	if err := w.conn.LeaveGroup(group); err != nil {
		return fmt.Errorf("leave %s: %w", group, err)
	}
	return nil
}

func (w *ndpWire) close() error {
	close(w.done)
	return errors.Join(w.conn.Close(), w.unicast.Close())
}

// interpretNDP says what an NDP message from src means. ok is false for
// messages to ignore: not a solicitation or advertisement, or sent from off
// the link (hop limit below 255, RFC 4861 7.1).
//
// A Neighbor Solicitation asks for its target; one sent from an address with
// a source link-layer option also claims that address for that MAC. A
// Neighbor Advertisement claims its target for its target link-layer address.
// Solicitations without a source address (duplicate address detection) ask
// too: answering them defends the VIP against a host about to configure it.
func interpretNDP(m ndp.Message, src netip.Addr, hopLimit int) (heard, bool) {
	if hopLimit != ndp.HopLimit {
		return heard{}, false
	}
	src = src.WithZone("")
	switch m := m.(type) {
	case *ndp.NeighborSolicitation:
		h := heard{asked: m.TargetAddress.WithZone(""), packet: src}
		if mac, ok := linkLayerAddress(m.Options, ndp.Source); ok && !src.IsUnspecified() {
			h.claimed, h.claimer = src, mac
		}
		return h, true
	case *ndp.NeighborAdvertisement:
		mac, ok := linkLayerAddress(m.Options, ndp.Target)
		if !ok {
			// No MAC to tell ours from a foreign one: RFC 4861 requires the
			// option in answers to multicast solicitations, which is what
			// resolving and probing a VIP sends.
			return heard{}, false
		}
		return heard{claimed: m.TargetAddress.WithZone(""), claimer: mac}, true
	}
	return heard{}, false
}

func linkLayerAddress(opts []ndp.Option, dir ndp.Direction) (net.HardwareAddr, bool) {
	for _, o := range opts {
		if lla, ok := o.(*ndp.LinkLayerAddress); ok && lla.Direction == dir {
			return lla.Addr, true
		}
	}
	return nil, false
}

// advertisement answers a solicitation from src for vip, which we own: a
// solicited advertisement back to src, with Override so it replaces whatever
// the asker had. A duplicate address detection probe (src unspecified) has no
// one to answer to: the advertisement goes to all nodes, unsolicited (RFC 4861
// 7.2.4).
func advertisement(vip, src netip.Addr, mac net.HardwareAddr) (*ndp.NeighborAdvertisement, netip.Addr) {
	if src.IsUnspecified() {
		return unsolicited(vip, mac), netip.IPv6LinkLocalAllNodes()
	}
	return &ndp.NeighborAdvertisement{
		Solicited:     true,
		Override:      true,
		TargetAddress: vip,
		Options:       []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: mac}},
	}, src
}

// unsolicited is the takeover announcement for vip, sent to all nodes: with
// Override, every host that has an entry for vip points it at mac (RFC 4861
// 7.2.6), as gratuitous ARP does for IPv4.
func unsolicited(vip netip.Addr, mac net.HardwareAddr) *ndp.NeighborAdvertisement {
	return &ndp.NeighborAdvertisement{
		Override:      true,
		TargetAddress: vip,
		Options:       []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: mac}},
	}
}

// solicitation asks who has vip, to vip's solicited-node group.
func solicitation(vip netip.Addr, mac net.HardwareAddr) (*ndp.NeighborSolicitation, netip.Addr, error) {
	dst, err := ndp.SolicitedNodeMulticast(vip)
	if err != nil {
		return nil, netip.Addr{}, err
	}
	return &ndp.NeighborSolicitation{
		TargetAddress: vip,
		Options:       []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: mac}},
	}, dst, nil
}

// groups counts the owned VIPs behind each solicited-node multicast group: VIPs
// that share their last 24 bits share a group, which is joined with the first
// and left with the last.
type groups map[netip.Addr]int

// add counts vip in; join is true when its group is new.
func (g groups) add(vip netip.Addr) (group netip.Addr, join bool, err error) {
	group, err = ndp.SolicitedNodeMulticast(vip)
	if err != nil {
		return netip.Addr{}, false, err
	}
	g[group]++
	return group, g[group] == 1, nil
}

// remove counts vip out; leave is true when no owned VIP needs its group.
func (g groups) remove(vip netip.Addr) (group netip.Addr, leave bool) {
	group, err := ndp.SolicitedNodeMulticast(vip)
	if err != nil || g[group] == 0 {
		return netip.Addr{}, false
	}
	g[group]--
	if g[group] > 0 {
		return group, false
	}
	delete(g, group)
	return group, true
}

// detect is duplicate address detection for vip (RFC 4862 5.4): a Neighbor
// Solicitation from the unspecified address, without a source link-layer
// option, to vip's solicited-node group. A host that has vip answers with an
// advertisement to all nodes, which next hears as its claim; the solicitation
// itself claims nothing, so no host's entry for vip changes. The ICMPv6
// socket sends only from an address of the interface, so the packet, IPv6
// header and all, goes out through the packet socket.
func (w *ndpWire) detect(vip netip.Addr) error {
	b, dst, err := dadPacket(vip)
	if err != nil {
		return err
	}
	_, err = w.unicast.WriteTo(b, &packet.Addr{HardwareAddr: multicastMAC(dst)})
	return err
}

// dadPacket is the IPv6 packet of a duplicate address detection solicitation
// for vip, and its destination.
func dadPacket(vip netip.Addr) ([]byte, netip.Addr, error) {
	dst, err := ndp.SolicitedNodeMulticast(vip)
	if err != nil {
		return nil, netip.Addr{}, err
	}
	src := netip.IPv6Unspecified()
	icmp, err := ndp.MarshalMessageChecksum(&ndp.NeighborSolicitation{TargetAddress: vip}, src, dst)
	if err != nil {
		return nil, netip.Addr{}, err
	}
	b := make([]byte, 40, 40+len(icmp))
	b[0] = 6 << 4
	binary.BigEndian.PutUint16(b[4:6], uint16(len(icmp)))
	b[6] = 58 // ICMPv6
	b[7] = ndp.HopLimit
	s16, d16 := src.As16(), dst.As16()
	copy(b[8:24], s16[:])
	copy(b[24:40], d16[:])
	return append(b, icmp...), dst, nil
}

// multicastMAC is the Ethernet address of IPv6 multicast group (RFC 2464 7).
func multicastMAC(group netip.Addr) net.HardwareAddr {
	g := group.As16()
	return net.HardwareAddr{0x33, 0x33, g[12], g[13], g[14], g[15]}
}
