package membership

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/memberlist"
	. "github.com/onsi/gomega"
)

// failoverBound is the package's promise (doc.go): a dead member is dead
// for the others within 2 s.
const failoverBound = 2 * time.Second

// startImpostor runs a plain memberlist member holding the key, named after
// node-b and advertising node-b's address while it sends from its own: it
// pulls state every 50 ms, so it hears at once that the others suspect
// "it" and refutes with a higher incarnation, from its own address.
func startImpostor(t *testing.T, victim netip.AddrPort) *memberlist.Memberlist {
	t.Helper()
	cfg := memberlist.DefaultLANConfig()
	cfg.Name = "node-b/impostor"
	cfg.BindAddr = loopbackAddr().String()
	cfg.BindPort = testPort
	cfg.AdvertiseAddr = victim.Addr().String()
	cfg.AdvertisePort = int(victim.Port())
	TunedTimers().applyTo(cfg)
	cfg.PushPullInterval = 50 * time.Millisecond
	cfg.EnableCompression = false
	cfg.LogOutput = &bytes.Buffer{}
	cfg.Logger = nil
	kr, err := memberlist.NewKeyring(nil, testKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Keyring = kr
	m, err := memberlist.Create(cfg)
	if err != nil {
		t.Fatalf("start the impostor: %v", err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

// A member with the key, named after node-b and advertising node-b's
// address, must not keep node-b alive once node-b's own agent is gone: it
// never answers at that address, so its alive claims (a join relayed by
// others, refutations it sends from its own address) are never believed.
func TestImpostorCannotKeepADeadNodeAlive(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	nodeAddr := map[string]netip.Addr{}
	admit := func(node string, addr netip.Addr) error {
		mu.Lock()
		defer mu.Unlock()
		if nodeAddr[node] != addr {
			return fmt.Errorf("Node %s has address %s, not %s", node, nodeAddr[node], addr)
		}
		return nil
	}
	withAdmit := func(c *Config) { c.Admit = admit }
	a, addrA := startMember(t, "node-a", withAdmit)
	b, addrB := startMember(t, "node-b", withAdmit)
	c, addrC := startMember(t, "node-c", withAdmit)
	mu.Lock()
	for node, addr := range map[string]string{"node-a": addrA, "node-b": addrB, "node-c": addrC} {
		nodeAddr[node] = netip.MustParseAddrPort(addr).Addr()
	}
	mu.Unlock()
	for _, m := range []*Cluster{b, c} {
		_, err := m.Join([]string{addrA})
		g.Expect(err).NotTo(HaveOccurred())
	}
	for _, m := range []*Cluster{a, b, c} {
		g.Eventually(membersOf(m), waitLimit).Should(HaveLen(3))
	}

	impostor := startImpostor(t, netip.MustParseAddrPort(addrB))
	_, err := impostor.Join([]string{addrA, addrC})
	g.Expect(err).NotTo(HaveOccurred(), "the impostor holds the key: its push/pull is accepted")
	g.Eventually(impostor.NumMembers, waitLimit).Should(Equal(4), "the impostor learned the members")
	g.Consistently(func() []int { return []int{a.list.NumMembers(), c.list.NumMembers()} }, 2*time.Second).
		Should(Equal([]int{3, 3}), "node-b's agent is alive and still the impostor is no member: it never answers at node-b's address")

	g.Expect(b.Shutdown()).To(Succeed())
	start := time.Now()
	want := map[string]State{"node-a": Active, "node-c": Active}
	g.Eventually(membersOf(a), failoverBound).Should(Equal(want), "node-b is dead for node-a within the bound")
	g.Eventually(membersOf(c), failoverBound-time.Since(start)).Should(Equal(want), "node-b is dead for node-c within the bound")
	t.Logf("node-b dead for both after %v", time.Since(start).Round(10*time.Millisecond))
	g.Consistently(membersOf(a), 3*time.Second).Should(Equal(want), "and stays dead while the impostor goes on refuting")
	g.Expect(a.Rejected()+c.Rejected()).To(BeNumerically(">", 0), "the refused claims are counted")
}

func TestGossipMessagesSplit(t *testing.T) {
	ping := []byte{byte(msgPing), 1, 2}
	alive := []byte{byte(msgAlive), 3}
	compound := func(parts ...[]byte) []byte {
		out := []byte{byte(msgCompound), byte(len(parts))}
		for _, p := range parts {
			out = binary.BigEndian.AppendUint16(out, uint16(len(p)))
		}
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	crc := func(b []byte) []byte {
		return append(binary.BigEndian.AppendUint32([]byte{byte(msgCRC)}, crc32.ChecksumIEEE(b)), b...)
	}
	for _, tc := range []struct {
		desc string
		in   []byte
		want [][]byte
		err  string
	}{
		{desc: "one message", in: ping, want: [][]byte{ping}},
		{desc: "compound", in: compound(ping, alive), want: [][]byte{ping, alive}},
		{desc: "checksummed compound", in: crc(compound(ping, alive)), want: [][]byte{ping, alive}},
		{desc: "compound in compound", in: compound(ping, compound(alive)), want: [][]byte{ping, alive}},
		{desc: "bad checksum", in: append(crc(ping)[:5], alive...), err: "bad checksum"},
		{desc: "truncated compound", in: compound(ping, alive)[:6], err: "truncated compound"},
		{desc: "compressed", in: []byte{byte(msgCompress), 0}, err: "compressed"},
		{desc: "empty", in: nil, err: "empty"},
	} {
		got, err := messages(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.err)) {
				t.Errorf("%s: got %v, want error %q", tc.desc, err, tc.err)
			}
		case err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want):
			t.Errorf("%s: got %v, %v; want %v", tc.desc, got, err, tc.want)
		}
	}
}

func TestSealOpensWithAnyInstalledKey(t *testing.T) {
	other := bytes.Repeat([]byte{9}, 16)
	sealed, err := seal(testKey, []byte("hello"), []byte("aad"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := open([][]byte{other, testKey}, sealed, []byte("aad")); err != nil || string(got) != "hello" {
		t.Fatalf("open = %q, %v", got, err)
	}
	if _, err := open([][]byte{other}, sealed, []byte("aad")); err == nil {
		t.Fatalf("opened with a key it was not sealed with")
	}
	if _, err := open([][]byte{testKey}, sealed, []byte("other aad")); err == nil {
		t.Fatalf("opened with other authenticated data")
	}
}

// A forged dead message about a live member (any key holder can send one)
// drops it everywhere it arrives, until it hears of its death and refutes
// from its own address: the cost is a flap of about a gossip round trip.
func TestForgedDeadIsRefuted(t *testing.T) {
	g := NewWithT(t)
	a, b, c := threeMembers(t)
	forger, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(loopbackAddr(), uint16(testPort))))
	g.Expect(err).NotTo(HaveOccurred())
	defer forger.Close()
	var msg bytes.Buffer
	msg.WriteByte(5) // memberlist's dead
	g.Expect(codec.NewEncoder(&msg, &codec.MsgpackHandle{}).Encode(&struct {
		Incarnation uint32
		Node, From  string
	}{1000, b.name, "node-c"})).To(Succeed())
	packet, err := seal(testKey, msg.Bytes(), nil)
	g.Expect(err).NotTo(HaveOccurred())

	start := time.Now()
	for _, m := range []*Cluster{a, c} {
		_, err := forger.WriteToUDPAddrPort(packet, netip.AddrPortFrom(addrOf(m.list.LocalNode().Addr), uint16(testPort)))
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Eventually(membersOf(a), waitLimit, time.Millisecond).ShouldNot(HaveKey("node-b"), "the forged dead is believed")
	g.Eventually(membersOf(a), failoverBound, time.Millisecond).Should(HaveKey("node-b"), "node-b refutes")
	g.Eventually(membersOf(c), failoverBound, time.Millisecond).Should(HaveKey("node-b"))
	t.Logf("node-b back for node-a and node-c %v after the forged dead", time.Since(start).Round(time.Millisecond))
}

// An ack ends a probe only when it comes from where the probe went: the
// pinged member, or a member asked to ping it for us.
func TestAcksCountOnlyFromWhereTheProbeWent(t *testing.T) {
	kr, err := memberlist.NewKeyring(nil, testKey)
	if err != nil {
		t.Fatal(err)
	}
	tr := &sourceBound{keyring: kr, probes: map[uint32]probe{}}
	send := func(kind msgType, seq uint32, to string) {
		var msg bytes.Buffer
		msg.WriteByte(byte(kind))
		if err := codec.NewEncoder(&msg, &codec.MsgpackHandle{}).Encode(&seqMsg{SeqNo: seq}); err != nil {
			t.Fatal(err)
		}
		packet, err := seal(testKey, msg.Bytes(), nil)
		if err != nil {
			t.Fatal(err)
		}
		tr.noteProbes(packet, to)
	}
	target, helper, other := netip.MustParseAddr("192.0.2.12"), netip.MustParseAddr("192.0.2.13"), netip.MustParseAddr("192.0.2.11")
	for _, step := range []struct {
		desc string
		send func()
		seq  uint32
		from netip.Addr
		want bool
	}{
		{desc: "no probe sent: no ack counts", seq: 7, from: target, want: false},
		{desc: "ping sent to the target: its ack counts", send: func() { send(msgPing, 7, "192.0.2.12:7946") }, seq: 7, from: target, want: true},
		{desc: "from another address it does not", seq: 7, from: helper, want: false},
		{desc: "nor for another probe", seq: 8, from: target, want: false},
		{desc: "indirect request sent: the helper's ack counts", send: func() { send(msgIndirectPing, 7, "192.0.2.13:7946") }, seq: 7, from: helper, want: true},
		{desc: "and still the target's", seq: 7, from: target, want: true},
		{desc: "not a third address", seq: 7, from: other, want: false},
		{desc: "an ack we send opens nothing", send: func() { send(msgAck, 9, "192.0.2.11:7946") }, seq: 9, from: other, want: false},
	} {
		if step.send != nil {
			step.send()
		}
		if got := tr.ackFrom(step.seq, step.from); got != step.want {
			t.Errorf("%s: ackFrom(%d, %s) = %v, want %v", step.desc, step.seq, step.from, got, step.want)
		}
	}
}
