package l2

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/packet"
	"golang.org/x/sys/unix"
)

// arpWire is IPv4's wire: one raw ARP socket on the interface.
type arpWire struct {
	ifi    *net.Interface
	client *arp.Client
}

func listenARP(ifi *net.Interface) (*arpWire, error) {
	conn, err := packet.Listen(ifi, packet.Raw, unix.ETH_P_ARP, nil)
	if err != nil {
		return nil, &net.OpError{Op: "listen arp", Net: ifi.Name, Err: err}
	}
	if err := growReadBuffer(conn); err != nil {
		_ = conn.Close()
		return nil, &net.OpError{Op: "listen arp", Net: ifi.Name, Err: err}
	}
	client, err := arp.New(ifi, conn)
	if err != nil {
		_ = conn.Close()
		return nil, &net.OpError{Op: "listen arp", Net: ifi.Name, Err: err}
	}
	return &arpWire{ifi: ifi, client: client}, nil
}

// readBuffer is the receive buffer of the sockets clients' questions arrive
// on. Every ARP packet of the segment arrives there, a flood included: the
// default (about 200 KiB, a few hundred packets) overflows when the agent is
// not scheduled for a few tens of milliseconds, and a client's request lost
// there goes unanswered. 4 MiB rides out a stall of several hundred
// milliseconds at 10,000 packets a second; it is kernel memory used only
// while packets wait.
const readBuffer = 4 << 20

// growReadBuffer sets readBuffer on conn, beyond net.core.rmem_max when the
// agent may (CAP_NET_ADMIN, which it has to write rules), else up to it.
func growReadBuffer(conn syscall.Conn) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var sockErr error
	if err := raw.Control(func(fd uintptr) {
		if sockErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, readBuffer); sockErr != nil {
			sockErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, readBuffer)
		}
	}); err != nil {
		return err
	}
	if sockErr != nil {
		return fmt.Errorf("receive buffer: %w", sockErr)
	}
	return nil
}

func (w *arpWire) protocol() string { return "ARP" }

// next reads the next ARP packet. Any ARP packet claims its sender address for
// the sender MAC; a request also asks for its target (unless it is a
// gratuitous one, which asks nothing).
func (w *arpWire) next() (heard, error) {
	for {
		p, _, err := w.client.Read()
		if err != nil {
			return heard{}, err
		}
		if w.ours(p.SenderHardwareAddr) {
			continue // our own packet, seen on the way out
		}
		h := heard{claimed: p.SenderIP, claimer: p.SenderHardwareAddr, packet: p}
		if p.Operation == arp.OperationRequest && p.SenderIP != p.TargetIP {
			h.asked = p.TargetIP
		}
		return h, nil
	}
}

func (w *arpWire) ours(mac net.HardwareAddr) bool { return string(mac) == string(w.ifi.HardwareAddr) }

func (w *arpWire) answer(h heard) error {
	p := h.packet.(*arp.Packet)
	return w.client.Reply(p, w.ifi.HardwareAddr, p.TargetIP)
}

// announce broadcasts a gratuitous ARP request (sender = target = vip), which
// updates the entry of every host that already has one for the VIP.
func (w *arpWire) announce(vip netip.Addr) error {
	p, err := arp.NewPacket(arp.OperationRequest, w.ifi.HardwareAddr, vip, ethernet.Broadcast, vip)
	if err != nil {
		return err
	}
	return w.client.WriteTo(p, ethernet.Broadcast)
}

// probe is an RFC 5227 probe (sender address 0.0.0.0): a host using vip
// answers it.
func (w *arpWire) probe(vip netip.Addr) error {
	p, err := arp.NewPacket(arp.OperationRequest, w.ifi.HardwareAddr, netip.IPv4Unspecified(), ethernet.Broadcast, vip)
	if err != nil {
		return err
	}
	return w.client.WriteTo(p, ethernet.Broadcast)
}

// detect is probe: an RFC 5227 probe claims nothing, so it serves before the
// first announcement too.
func (w *arpWire) detect(vip netip.Addr) error { return w.probe(vip) }

// ARP requests are broadcast: nothing to join.
func (w *arpWire) start(netip.Addr) error { return nil }
func (w *arpWire) stop(netip.Addr) error  { return nil }

func (w *arpWire) close() error { return w.client.Close() }
