package service

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
)

func addrList(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestAddressChanges(t *testing.T) {
	for _, tc := range []struct {
		desc                            string
		had, held                       []netip.Addr
		wantMoves, wantAlloc, wantReles string
	}{
		{desc: "nothing changed", had: addrList("192.0.2.1"), held: addrList("192.0.2.1"), wantMoves: "[]", wantAlloc: "[]", wantReles: "[]"},
		{desc: "first allocation", held: addrList("192.0.2.1"), wantMoves: "[]", wantAlloc: "[192.0.2.1]", wantReles: "[]"},
		{desc: "a move", had: addrList("192.0.2.1"), held: addrList("198.51.100.1"), wantMoves: "[192.0.2.1→198.51.100.1]", wantAlloc: "[]", wantReles: "[]"},
		{desc: "dual-stack, IPv4 moves, IPv6 stays", had: addrList("2001:db8::1", "192.0.2.1"), held: addrList("2001:db8::1", "203.0.113.1"),
			wantMoves: "[192.0.2.1→203.0.113.1]", wantAlloc: "[]", wantReles: "[]"},
		{desc: "dual-stack turned single: a release, not a move", had: addrList("192.0.2.1", "2001:db8::1"), held: addrList("192.0.2.1"),
			wantMoves: "[]", wantAlloc: "[]", wantReles: "[2001:db8::1]"},
		{desc: "a family gained while the other moves", had: addrList("192.0.2.1"), held: addrList("203.0.113.1", "2001:db8::1"),
			wantMoves: "[192.0.2.1→203.0.113.1]", wantAlloc: "[2001:db8::1]", wantReles: "[]"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			moves, alloc, rel := addressChanges(tc.had, tc.held)
			var ms []string
			for _, m := range moves {
				ms = append(ms, m.from.String()+"→"+m.to.String())
			}
			if got := fmt.Sprint(ms); got != tc.wantMoves {
				t.Errorf("moves %s, want %s", got, tc.wantMoves)
			}
			if got := fmt.Sprint(alloc); got != tc.wantAlloc {
				t.Errorf("allocated %s, want %s", got, tc.wantAlloc)
			}
			if got := fmt.Sprint(rel); got != tc.wantReles {
				t.Errorf("released %s, want %s", got, tc.wantReles)
			}
		})
	}
}

// TestStrandedConditions: the condition of a Service left on an address its
// groups no longer allow says so, keeps the address, and names the fix.
func TestStrandedConditions(t *testing.T) {
	group := func(segment string, excluded ...string) []*allocator.Group {
		g, err := k8salloc.Group(&paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "ext"}, Spec: paasv1.IPGroupSpec{Segment: segment, ExcludedIPs: excluded}})
		if err != nil {
			t.Fatal(err)
		}
		return []*allocator.Group{g}
	}
	a := allocator.New()
	a.SetGroups(group("192.0.2.0/31"))
	api := allocator.Request{Families: []allocator.Family{allocator.IPv4}, IPs: addrList("192.0.2.0")}
	auto := allocator.Request{Families: []allocator.Family{allocator.IPv4}}
	if _, err := a.Allocate("ns/api", api); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Allocate("ns/auto", auto); err != nil {
		t.Fatal(err)
	}
	groupOf := func(addr netip.Addr) string { return groupOf(a, addr) }
	svc := &corev1.Service{}

	a.SetGroups(group("198.51.100.0/31"))
	held, err := a.Allocate("ns/api", api)
	c := ipAllocatedCondition(svc, held, groupOf, err)
	if !slices.Equal(held, addrList("192.0.2.0")) || c.Status != metav1.ConditionFalse || c.Reason != paasv1.ReasonRequestedIPOutsideGroups ||
		c.Message != "requested 192.0.2.0 is in no IPGroup; request an address inside an IPGroup's segment or create an IPGroup that holds it (keeps 192.0.2.0 meanwhile)" {
		t.Errorf("request outside every group: holds %v, condition %s/%s %q", held, c.Status, c.Reason, c.Message)
	}

	a.SetGroups(group("198.51.100.0/31", "198.51.100.0/31"))
	held, err = a.Allocate("ns/auto", auto)
	c = ipAllocatedCondition(svc, held, groupOf, err)
	if !slices.Equal(held, addrList("192.0.2.1")) || c.Status != metav1.ConditionFalse || c.Reason != paasv1.ReasonIPGroupFull ||
		c.Message != "192.0.2.1 is no longer allowed by an IPGroup that admits this Service (segment, addresses, excludedIPs, avoidBuggyIPs or selectors changed) and cannot move: "+
			"no free IPv4 address in IPGroup ext (0 of 0 in use); add addresses to a group, create another group, or free an address (keeps 192.0.2.1 meanwhile)" {
		t.Errorf("nowhere to move: holds %v, condition %s/%s %q", held, c.Status, c.Reason, c.Message)
	}
}
