package membership

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// ownership is what the announcer would do with each member's view: a member
// that sees more than half of the n members owns the VIPs the rendezvous hash
// gives it among the members it sees. It returns the owners of each VIP, and
// a problem: a VIP with other than one owner, or a member not seeing all n.
func ownership(nodes []string, views []map[string]State, vips []netip.Addr) string {
	var problems []string
	owners := map[netip.Addr][]string{}
	for i, view := range views {
		if len(view) != len(nodes) {
			problems = append(problems, fmt.Sprintf("%s sees %d of %d members", nodes[i], len(view), len(nodes)))
		}
		if 2*len(view) <= len(nodes) {
			continue // a minority answers for nothing
		}
		names := make([]string, 0, len(view))
		for n := range view {
			names = append(names, n)
		}
		for _, vip := range vips {
			if election.Pick(vip, names) == nodes[i] {
				owners[vip] = append(owners[vip], nodes[i])
			}
		}
	}
	for _, vip := range vips {
		if len(owners[vip]) != 1 {
			problems = append(problems, fmt.Sprintf("%s owned by %v", vip, owners[vip]))
		}
	}
	return strings.Join(problems, "; ")
}

// watchOwnership samples ownership every 20 ms until stop; it returns the
// problems seen and how many samples were taken.
func watchOwnership(nodes []string, members []*Cluster, vips []netip.Addr) (stop func() (problems []string, samples int)) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var problems []string
	samples := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			views := make([]map[string]State, len(members))
			for i, m := range members {
				views[i] = m.Members()
			}
			samples++
			if p := ownership(nodes, views, vips); p != "" && len(problems) < 20 {
				problems = append(problems, time.Now().Format("15:04:05.000")+" "+p)
			}
		}
	}()
	return func() ([]string, int) { close(done); wg.Wait(); return problems, samples }
}

// Rotating the key in three steps, each applied member by member (as agents
// pick up a Secret change at different moments), keeps every member seeing
// every other and every VIP with exactly one owner; changing it in one step
// does not, which shows the check would catch a split.
func TestKeyRotationNeverSplitsTheMembers(t *testing.T) {
	g := NewWithT(t)
	oldKey, newKey := testKey, bytes.Repeat([]byte{9}, 32)
	nodes := []string{"node-a", "node-b", "node-c", "node-d"}
	members := make([]*Cluster, len(nodes))
	var addrA string
	for i, n := range nodes {
		var addr string
		members[i], addr = startMember(t, n)
		if i == 0 {
			addrA = addr
			continue
		}
		_, err := members[i].Join([]string{addrA})
		g.Expect(err).NotTo(HaveOccurred())
	}
	for _, m := range members {
		g.Eventually(membersOf(m), waitLimit).Should(HaveLen(len(nodes)))
	}
	var vips []netip.Addr
	for i := range 32 {
		vips = append(vips, netip.AddrFrom4([4]byte{192, 0, 2, byte(100 + i)}))
	}

	stop := watchOwnership(nodes, members, vips)
	for _, step := range []struct {
		desc string
		keys [][]byte
	}{
		{"add the new key", [][]byte{oldKey, newKey}},
		{"make it primary", [][]byte{newKey, oldKey}},
		{"remove the old key", [][]byte{newKey}},
	} {
		for _, m := range members {
			g.Expect(m.SetKeys(step.keys)).To(Succeed(), step.desc)
			time.Sleep(500 * time.Millisecond) // the next agent reads the Secret a little later
		}
		time.Sleep(3 * time.Second) // some gossip and probe rounds on the step's keyring
	}
	problems, samples := stop()
	g.Expect(problems).To(BeEmpty(), "during the rotation (%d samples)", samples)
	g.Expect(samples).To(BeNumerically(">", 100))
	for _, m := range members {
		g.Expect(m.Keys()).To(Equal([]string{Fingerprint(newKey)}))
	}

	// Control: one member jumps to a key nobody else has (as a Secret
	// deleted and recreated, read by one agent first): the members split,
	// and the same check sees it.
	stop = watchOwnership(nodes, members, vips)
	g.Expect(members[0].SetKeys([][]byte{bytes.Repeat([]byte{10}, 32)})).To(Succeed())
	g.Eventually(func() map[string]State { return members[1].Members() }, waitLimit).ShouldNot(HaveKey("node-a"))
	time.Sleep(200 * time.Millisecond) // a few samples of the split
	problems, _ = stop()
	g.Expect(problems).NotTo(BeEmpty(), "a one-step key change must be seen as a split")
}

func TestSetKeysRefusesBadKeys(t *testing.T) {
	g := NewWithT(t)
	a, _ := startMember(t, "node-a")
	g.Expect(a.SetKeys(nil)).To(MatchError(ContainSubstring("no key")))
	g.Expect(a.SetKeys([][]byte{testKey, {1, 2, 3}})).To(MatchError(ContainSubstring("key 2 has 3 bytes")))
	g.Expect(a.Keys()).To(Equal([]string{Fingerprint(testKey)}), "a refused change changes nothing")
}

// A member counts only when Admit accepts the address it speaks from for the
// node it names: a member claiming another node's name, or a node's member on
// an address that is not the node's, is not counted, and is counted once the
// Node's address is its own.
func TestMembersBoundToTheirNodesAddress(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	nodeAddr := map[string]netip.Addr{} // the Nodes' InternalIPs, as the agents' index holds them
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
	mu.Lock()
	nodeAddr["node-a"] = netip.MustParseAddrPort(addrA).Addr()
	nodeAddr["node-b"] = netip.MustParseAddrPort(addrB).Addr()
	mu.Unlock()
	_, err := b.Join([]string{addrA})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(membersOf(a), waitLimit).Should(HaveLen(2))

	// Holding the key is not enough: an impostor naming node-b from its own
	// address, and node-c whose Node says another address.
	impostor, _ := startMember(t, "node-b")
	c, addrC := startMember(t, "node-c", withAdmit)
	mu.Lock()
	nodeAddr["node-c"] = netip.MustParseAddr("192.0.2.13")
	mu.Unlock()
	for _, m := range []*Cluster{impostor, c} {
		_, _ = m.Join([]string{addrA})
	}
	g.Eventually(a.Rejected, waitLimit).Should(BeNumerically(">=", 2))
	g.Consistently(membersOf(a), 2*time.Second).Should(Equal(map[string]State{"node-a": Active, "node-b": Active}))
	g.Expect(b.Members()).To(Equal(map[string]State{"node-a": Active, "node-b": Active}))

	// node-c's Node gets its real address: the next join counts it.
	mu.Lock()
	nodeAddr["node-c"] = netip.MustParseAddrPort(addrC).Addr()
	mu.Unlock()
	_, err = c.Join([]string{addrA})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(membersOf(a), waitLimit).Should(HaveKey("node-c"))
	g.Eventually(membersOf(b), waitLimit).Should(HaveKey("node-c"))
	g.Expect(slices.Sorted(func(yield func(string) bool) {
		for n := range a.Members() {
			if !yield(n) {
				return
			}
		}
	})).To(Equal([]string{"node-a", "node-b", "node-c"}))
}
