package membership

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/hashicorp/memberlist"
	. "github.com/onsi/gomega"
)

// These tests run real members on loopback: each member gets its own
// 127.x.y.z address (all of 127/8 is local on Linux) and a port chosen per
// test process, so parallel runs and a real agent on 7946 do not collide.
// They wait with generous limits and never assert how long anything took:
// timing is what bench/membership measures.

const waitLimit = 30 * time.Second

var (
	testPort   = 20000 + rand.IntN(20000)
	testSubnet = [2]byte{byte(1 + rand.IntN(250)), byte(rand.IntN(256))}
	nextHost   atomic.Int32
)

var testKey = bytes.Repeat([]byte{7}, 32)

func loopbackAddr() netip.Addr {
	h := nextHost.Add(1)
	return netip.AddrFrom4([4]byte{127, testSubnet[0], testSubnet[1] + byte(h/250), byte(1 + h%250)})
}

// startMember starts a member named name with the test key (unless cfg sets
// another) and stops it when the test ends.
func startMember(t *testing.T, name string, mutate ...func(*Config)) (*Cluster, string) {
	t.Helper()
	cfg := Config{NodeName: name, BindAddr: loopbackAddr(), Port: testPort, Keys: [][]byte{testKey}, Log: logr.Discard()}
	for _, m := range mutate {
		m(&cfg)
	}
	c, err := Start(cfg)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { _ = c.Shutdown() })
	return c, netip.AddrPortFrom(cfg.BindAddr, uint16(testPort)).String()
}

func membersOf(c *Cluster) func() map[string]State { return c.Members }

func TestJoinOfThreeAndDeadAddressTolerated(t *testing.T) {
	g := NewWithT(t)
	a, addrA := startMember(t, "node-a")
	b, _ := startMember(t, "node-b")
	c, _ := startMember(t, "node-c")
	g.Expect(a.Members()).To(Equal(map[string]State{"node-a": Active}), "before any join a member knows only itself")

	n, err := b.Join([]string{addrA})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1))
	// A bare host takes c's own port; the dead address is skipped.
	dead := netip.AddrPortFrom(loopbackAddr(), uint16(testPort)).String()
	n, err = c.Join([]string{dead, strings.Split(addrA, ":")[0]})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1))

	want := map[string]State{"node-a": Active, "node-b": Active, "node-c": Active}
	for _, m := range []*Cluster{a, b, c} {
		g.Eventually(membersOf(m), waitLimit).Should(Equal(want))
	}
	g.Eventually(a.Changed()).Should(Receive(), "joins are signalled")
}

func TestJoinFailsWhenNobodyAnswers(t *testing.T) {
	g := NewWithT(t)
	a, _ := startMember(t, "node-a")
	_, err := a.Join([]string{netip.AddrPortFrom(loopbackAddr(), uint16(testPort)).String(), "127.0.0.1:notaport"})
	g.Expect(err).To(MatchError(ContainSubstring("none of 2 addresses answered")))
	g.Expect(err).To(MatchError(ContainSubstring("port must be a number")))
}

func threeMembers(t *testing.T, mutate ...func(*Config)) (a, b, c *Cluster) {
	t.Helper()
	g := NewWithT(t)
	a, addrA := startMember(t, "node-a", mutate...)
	b, _ = startMember(t, "node-b", mutate...)
	c, _ = startMember(t, "node-c", mutate...)
	for _, m := range []*Cluster{b, c} {
		_, err := m.Join([]string{addrA})
		g.Expect(err).NotTo(HaveOccurred())
	}
	for _, m := range []*Cluster{a, b, c} {
		g.Eventually(membersOf(m), waitLimit).Should(HaveLen(3))
	}
	return a, b, c
}

func TestShutdownMemberIsDeclaredDead(t *testing.T) {
	g := NewWithT(t)
	a, b, c := threeMembers(t)
	drain(a.Changed())

	g.Expect(c.Shutdown()).To(Succeed())
	g.Expect(c.Shutdown()).To(Succeed(), "a second Shutdown is a no-op")

	want := map[string]State{"node-a": Active, "node-b": Active}
	g.Eventually(membersOf(a), waitLimit).Should(Equal(want))
	g.Eventually(membersOf(b), waitLimit).Should(Equal(want))
	g.Expect(a.Changed()).To(Receive(), "the death is signalled")
}

func TestLeaveIsSeenWithoutFailureDetection(t *testing.T) {
	g := NewWithT(t)
	// A suspicion timeout of SuspicionMult(1000) * 0.2 s = 200 s: if the
	// others dropped node-c within the wait limit, the leave message did it,
	// not failure detection.
	a, b, c := threeMembers(t, func(cfg *Config) { cfg.Timers.SuspicionMult = 1000 })

	g.Expect(c.Leave(0)).To(Succeed())
	want := map[string]State{"node-a": Active, "node-b": Active}
	g.Eventually(membersOf(a), waitLimit).Should(Equal(want))
	g.Eventually(membersOf(b), waitLimit).Should(Equal(want))
	g.Expect(c.SetState(Draining)).To(MatchError(ContainSubstring("membership stopped")))
}

func TestStateIsBroadcast(t *testing.T) {
	g := NewWithT(t)
	a, b, c := threeMembers(t)

	g.Expect(b.SetState(Draining)).To(Succeed())
	g.Expect(b.Members()).To(HaveKeyWithValue("node-b", Draining), "own state is visible at once")
	for _, m := range []*Cluster{a, c} {
		g.Eventually(membersOf(m), waitLimit).Should(HaveKeyWithValue("node-b", Draining))
	}
	g.Expect(a.Members()).To(HaveKeyWithValue("node-c", Active))

	g.Expect(b.SetState(Active)).To(Succeed())
	for _, m := range []*Cluster{a, c} {
		g.Eventually(membersOf(m), waitLimit).Should(HaveKeyWithValue("node-b", Active))
	}
	g.Expect(b.SetState("Gone")).To(MatchError(ContainSubstring(`set state "Gone": want`)))
}

func TestRestartedMemberIsAliveAgain(t *testing.T) {
	// An agent restarted on the same node (same name and address) comes
	// back even while the others still hold its previous incarnation.
	g := NewWithT(t)
	a, addrA := startMember(t, "node-a")
	bAddr := loopbackAddr()
	sameNode := func(cfg *Config) { cfg.BindAddr = bAddr }
	b, _ := startMember(t, "node-b", sameNode)
	_, err := b.Join([]string{addrA})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(membersOf(a), waitLimit).Should(HaveKey("node-b"))
	g.Expect(b.SetState(Draining)).To(Succeed())
	g.Eventually(membersOf(a), waitLimit).Should(HaveKeyWithValue("node-b", Draining))

	g.Expect(b.Shutdown()).To(Succeed())
	b2, _ := startMember(t, "node-b", sameNode)
	_, err = b2.Join([]string{addrA})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(membersOf(b2), waitLimit).Should(Equal(map[string]State{"node-a": Active, "node-b": Active}))
	g.Eventually(membersOf(a), waitLimit).Should(Equal(map[string]State{"node-a": Active, "node-b": Active}),
		"the new incarnation's state replaces the old one's")
}

func TestRestartingMemberKeepsItsNodeAlive(t *testing.T) {
	// An agent that stops Restarting keeps its node counted alive for the
	// grace (no VIP moves during an agent restart), and no longer after it.
	g := NewWithT(t)
	grace := func(cfg *Config) { cfg.RestartGrace = 3 * time.Second }
	a, addrA := startMember(t, "node-a", grace)
	b, _ := startMember(t, "node-b", grace)
	_, err := b.Join([]string{addrA})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(membersOf(a), waitLimit).Should(HaveKey("node-b"))

	g.Expect(b.SetState(Restarting)).To(Succeed())
	g.Expect(b.Shutdown()).To(Succeed())
	// Gone from memberlist (the failure detector sees it dead), yet counted.
	g.Eventually(func() int { return a.list.NumMembers() }, waitLimit).Should(Equal(1))
	g.Expect(a.Members()).To(HaveKeyWithValue("node-b", Active))
	g.Eventually(membersOf(a), waitLimit).Should(Equal(map[string]State{"node-a": Active}), "the grace ends")

	// A new agent on the node ends the grace early.
	b2, _ := startMember(t, "node-b", grace)
	_, err = b2.Join([]string{addrA})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(membersOf(a), waitLimit).Should(HaveKeyWithValue("node-b", Active))
	g.Expect(b2.SetState(Restarting)).To(Succeed())
	g.Expect(b2.Shutdown()).To(Succeed())
	b3, _ := startMember(t, "node-b", grace)
	_, err = b3.Join([]string{addrA})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() int { return a.list.NumMembers() }, waitLimit).Should(Equal(2))
	g.Expect(a.Members()).To(Equal(map[string]State{"node-a": Active, "node-b": Active}))
}

func TestMemberWithoutTheKeyCannotJoin(t *testing.T) {
	g := NewWithT(t)
	a, addrA := startMember(t, "node-a")
	b, _ := startMember(t, "node-b")
	_, err := b.Join([]string{addrA})
	g.Expect(err).NotTo(HaveOccurred())

	otherKey := bytes.Repeat([]byte{8}, 32)
	intruder, addrIntruder := startMember(t, "intruder", func(cfg *Config) { cfg.Keys = [][]byte{otherKey} })
	_, err = intruder.Join([]string{addrA})
	g.Expect(err).To(HaveOccurred(), "a push/pull with the wrong key must fail")
	_, err = a.Join([]string{addrIntruder})
	g.Expect(err).To(HaveOccurred(), "nor may we pull the intruder's state")

	// memberlist with no keyring at all: it speaks plain text, which our
	// members must refuse (GossipVerifyIncoming) in both directions.
	plainCfg := memberlist.DefaultLANConfig()
	plainCfg.Name = "plain"
	plainCfg.BindAddr = loopbackAddr().String()
	plainCfg.BindPort = testPort
	plainCfg.Logger = nil
	plainCfg.LogOutput = &bytes.Buffer{}
	plain, err := memberlist.Create(plainCfg)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = plain.Shutdown() })
	_, err = plain.Join([]string{addrA})
	g.Expect(err).To(HaveOccurred(), "an unencrypted join must fail")

	only := map[string]State{"node-a": Active, "node-b": Active}
	for _, m := range []*Cluster{a, b} {
		// A join returns once the joiner has the other's state; the other
		// merges the joiner's just after answering, so wait for it first.
		g.Eventually(membersOf(m), 2*time.Second).Should(Equal(only))
		g.Consistently(membersOf(m), 3*time.Second).Should(Equal(only))
	}
	g.Expect(plain.NumMembers()).To(Equal(1), "the plain member learned nothing")
	g.Expect(intruder.Members()).To(Equal(map[string]State{"intruder": Active}), "the intruder learned nothing")
}

func TestStartRefusesBadConfig(t *testing.T) {
	good := Config{NodeName: "n", BindAddr: netip.MustParseAddr("127.0.0.1"), Keys: [][]byte{testKey}}
	for _, tc := range []struct {
		desc   string
		mutate func(*Config)
		want   string
	}{
		{"no node name", func(c *Config) { c.NodeName = "" }, "NodeName is empty"},
		{"no address", func(c *Config) { c.BindAddr = netip.Addr{} }, "set it to the node's own address"},
		{"wildcard address", func(c *Config) { c.BindAddr = netip.MustParseAddr("0.0.0.0") }, "set it to the node's own address"},
		{"port out of range", func(c *Config) { c.Port = 70000 }, "outside 1-65535"},
		{"no key", func(c *Config) { c.Keys = nil }, "no key: give at least one"},
		{"short key", func(c *Config) { c.Keys = [][]byte{make([]byte, 15)} }, "key 1 has 15 bytes: it must have 16, 24 or 32"},
		{"short second key", func(c *Config) { c.Keys = [][]byte{testKey, make([]byte, 20)} }, "key 2 has 20 bytes"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg := good
			tc.mutate(&cfg)
			_, err := Start(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start: got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestJoinAddr(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "192.0.2.1", want: "192.0.2.1:7000"},
		{in: "192.0.2.1:7946", want: "192.0.2.1:7946"},
		{in: "2001:db8::1", want: "[2001:db8::1]:7000"},
		{in: "[2001:db8::1]", want: "[2001:db8::1]:7000"},
		{in: "[2001:db8::1]:7946", want: "[2001:db8::1]:7946"},
		{in: "node-1.example", want: "node-1.example:7000"},
		{in: "node-1.example:7946", want: "node-1.example:7946"},
		{in: "", err: "empty address"},
		{in: "192.0.2.1:0", err: "port must be a number from 1 to 65535"},
		{in: "192.0.2.1:http", err: "port must be a number from 1 to 65535"},
		{in: ":7946", err: "has no host"},
	} {
		got, err := joinAddr(tc.in, 7000)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("joinAddr(%q): got %q, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("joinAddr(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestParseLogLine(t *testing.T) {
	for _, tc := range []struct {
		line, msg string
		level     int
	}{
		{"[ERR] memberlist: Failed to decrypt packet", "Failed to decrypt packet", -1},
		{"[WARN] memberlist: Refuting a suspect message (from: b)", "Refuting a suspect message (from: b)", 1},
		{"[INFO] memberlist: Marking b as failed, suspect timeout reached", "Marking b as failed, suspect timeout reached", 2},
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:5", "Stream connection from=127.0.0.1:5", 4},
		{"no level at all", "no level at all", 1},
	} {
		level, msg := parseLogLine(tc.line)
		if level != tc.level || msg != tc.msg {
			t.Errorf("parseLogLine(%q) = %d, %q; want %d, %q", tc.line, level, msg, tc.level, tc.msg)
		}
	}
}

func TestLogWriterRoutesLevels(t *testing.T) {
	var lines []string
	log := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 1})
	w := logWriter{log}
	fmt.Fprintln(w, "[ERR] memberlist: bad packet")
	fmt.Fprintln(w, "[WARN] memberlist: refuting")
	fmt.Fprintln(w, "[DEBUG] memberlist: stream")
	if len(lines) != 2 || !strings.Contains(lines[0], `"error"="memberlist"`) || !strings.Contains(lines[0], "bad packet") ||
		!strings.Contains(lines[1], "refuting") {
		t.Fatalf("at verbosity 1 want the error and the warning, got %q", lines)
	}
}

func TestTimersDefaultFieldByField(t *testing.T) {
	tuned := TunedTimers()
	got := Timers{ProbeInterval: time.Second, SuspicionMult: 5}.withDefaults()
	want := tuned
	want.ProbeInterval, want.SuspicionMult = time.Second, 5
	if got != want {
		t.Fatalf("withDefaults: got %+v, want %+v", got, want)
	}
	if (Timers{}).withDefaults() != tuned {
		t.Fatalf("the zero value must be the tuned timers")
	}
	lan := memberlist.DefaultLANConfig()
	cfg := memberlist.DefaultLANConfig()
	TimersOf(lan).applyTo(cfg)
	if TimersOf(cfg) != TimersOf(lan) {
		t.Fatalf("TimersOf and applyTo must round-trip")
	}
}

func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// A second member on a taken address and port fails with ErrPortInUse, the
// error the agent explains (another gossip, such as MetalLB's speaker).
func TestStartOnTakenPort(t *testing.T) {
	_, addr := startMember(t, "first")
	at := netip.MustParseAddrPort(addr)
	_, err := Start(Config{NodeName: "second", BindAddr: at.Addr(), Port: int(at.Port()), Keys: [][]byte{testKey}, Log: logr.Discard()})
	if !errors.Is(err, ErrPortInUse) {
		t.Fatalf("start on %s taken: %v, want ErrPortInUse", addr, err)
	}
}
