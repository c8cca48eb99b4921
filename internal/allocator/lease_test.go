package allocator

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestReleasedRequestedAddressIsLeased(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	grace := 5 * time.Minute
	ask := func(ips ...string) Request { return Request{Families: v4, IPs: addrs(ips...)} }
	pool := Request{Families: v4}
	a := New()
	a.SetGroups([]*Group{mustGroup(t, Group{Name: "lan", Segment: pfx("192.0.2.0/29"), Excluded: pfxs("192.0.2.0"), AutoAssign: true})})
	// Each step: at a time, a key releases (with what it had asked for), or allocates.
	for i, s := range []struct {
		desc    string
		at      time.Duration // after t0
		key     string
		release []string // release key, which had asked for these; nil: allocate req
		req     Request
		want    []string
		wantErr error
	}{
		{desc: "the owner asks for .5", key: "a/web", req: ask("192.0.2.5"), want: []string{"192.0.2.5"}},
		{desc: "another tenant asks for it: in use", key: "b/wait", req: ask("192.0.2.5"), wantErr: ErrInUse},
		{desc: "a pool Service takes .1", key: "a/pool", req: pool, want: []string{"192.0.2.1"}},
		{desc: "the owner is deleted", at: time.Second, key: "a/web", release: []string{"192.0.2.5"}},
		{desc: "the waiter is refused while the lease lasts", at: 2 * time.Second, key: "b/wait", req: ask("192.0.2.5"), wantErr: ErrLeased},
		{desc: "no key gets it from the pool", at: 2 * time.Second, key: "c/pool", req: pool, want: []string{"192.0.2.2"}},
		{desc: "the owner, created again within the grace, gets it back", at: time.Minute, key: "a/web", req: ask("192.0.2.5"), want: []string{"192.0.2.5"}},
		{desc: "the waiter sees it in use again", at: time.Minute, key: "b/wait", req: ask("192.0.2.5"), wantErr: ErrInUse},
		{desc: "the owner is deleted again", at: 2 * time.Minute, key: "a/web", release: []string{"192.0.2.5"}},
		{desc: "just before the lease ends: still refused", at: 2*time.Minute + grace - time.Nanosecond, key: "b/wait", req: ask("192.0.2.5"), wantErr: ErrLeased},
		{desc: "the lease ended: the waiter gets it", at: 2*time.Minute + grace, key: "b/wait", req: ask("192.0.2.5"), want: []string{"192.0.2.5"}},
		{desc: "a pool address is not leased when released", at: 8 * time.Minute, key: "a/pool", release: []string{}},
		{desc: "another key gets it from the pool at once", at: 8 * time.Minute, key: "d/pool", req: pool, want: []string{"192.0.2.1"}},
		{desc: "a key that asked for an address it never held leases nothing", at: 9 * time.Minute, key: "e/wait", release: []string{"192.0.2.3"}},
		{desc: "so another key takes that address", at: 9 * time.Minute, key: "f/web", req: ask("192.0.2.3"), want: []string{"192.0.2.3"}},
		{desc: "f releases its requested .3", at: 10 * time.Minute, key: "f/web", release: []string{"192.0.2.3"}},
		{desc: "the pool skips the leased .3", at: 10 * time.Minute, key: "g/pool", req: pool, want: []string{"192.0.2.4"}},
		{desc: "after the lease the pool hands .3 out again", at: 10*time.Minute + grace, key: "h/pool", req: pool, want: []string{"192.0.2.3"}},
	} {
		now := t0.Add(s.at)
		a.ExpireLeases(now)
		var got []netip.Addr
		var err error
		if s.release != nil {
			a.ReleaseRequested(s.key, addrs(s.release...), now.Add(grace))
		} else {
			got, err = a.Allocate(s.key, s.req)
		}
		if (s.wantErr == nil && err != nil) || (s.wantErr != nil && !errors.Is(err, s.wantErr)) {
			t.Fatalf("step %d %q: error %v, want %v", i, s.desc, err, s.wantErr)
		}
		if !slices.Equal(got, addrs(s.want...)) {
			t.Fatalf("step %d %q: holds %v, want %v", i, s.desc, got, s.want)
		}
		checkNoDuplicates(t, a)
	}
}

func TestLeaseRefusalNamesNoOtherTenant(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	a := New()
	a.SetGroups([]*Group{mustGroup(t, Group{Name: "lan", Segment: pfx("192.0.2.0/24"), AutoAssign: true})})
	if _, err := a.Allocate("shop/api", Request{Families: v4, IPs: addrs("192.0.2.9")}); err != nil {
		t.Fatal(err)
	}
	a.ReleaseRequested("shop/api", addrs("192.0.2.9"), t0.Add(5*time.Minute))
	if l, ok := a.LeaseOf(addrs("192.0.2.9")[0]); !ok || l.Holder != "shop/api" {
		t.Fatalf("lease %v %v, want one for shop/api", l, ok)
	}
	if end, ok := a.NextLeaseEnd(); !ok || !end.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("next lease end %v %v", end, ok)
	}
	_, err := a.Allocate("bank/api", Request{Families: v4, IPs: addrs("192.0.2.9")})
	if !errors.Is(err, ErrLeased) || strings.Contains(err.Error(), "shop") || !strings.Contains(err.Error(), "until 2030-01-01T12:05:00Z") {
		t.Fatalf("error %q: want ErrLeased with the expiry, not naming shop/api", err)
	}
	if freed := a.ExpireLeases(t0.Add(5 * time.Minute)); !slices.Equal(freed, addrs("192.0.2.9")) {
		t.Fatalf("expired %v", freed)
	}
	if _, ok := a.NextLeaseEnd(); ok {
		t.Fatal("a lease is left")
	}
}

func TestReleaseRequestedWithoutGraceLeasesNothing(t *testing.T) {
	a := New()
	a.SetGroups([]*Group{mustGroup(t, Group{Name: "lan", Segment: pfx("192.0.2.0/24"), AutoAssign: true})})
	if _, err := a.Allocate("a/x", Request{Families: v4, IPs: addrs("192.0.2.9")}); err != nil {
		t.Fatal(err)
	}
	a.ReleaseRequested("a/x", addrs("192.0.2.9"), time.Time{})
	if got, err := a.Allocate("b/y", Request{Families: v4, IPs: addrs("192.0.2.9")}); err != nil || !slices.Equal(got, addrs("192.0.2.9")) {
		t.Fatalf("got %v %v, want the address at once", got, err)
	}
}

func TestInUseRefusalNamesOnlyItsOwnTenant(t *testing.T) {
	a := New()
	a.SetGroups([]*Group{mustGroup(t, Group{Name: "lan", Segment: pfx("192.0.2.0/24"), AutoAssign: true})})
	_ = a.Assign("VirtualIP legacy/app-vip", addrs("192.0.2.8")...)
	if _, err := a.Allocate("shop/api", Request{Families: v4, IPs: addrs("192.0.2.9")}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key, ip, want string
	}{
		{"shop/web", "192.0.2.9", "requested 192.0.2.9 is already held by shop/api; request a free address or release it there"},
		{"bank/web", "192.0.2.9", "requested 192.0.2.9 is already held by a Service in another namespace; request a free address or release it there"},
		{"legacy/web", "192.0.2.8", "requested 192.0.2.8 is already held by VirtualIP legacy/app-vip; request a free address or release it there"},
		{"bank/web", "192.0.2.8", "requested 192.0.2.8 is already held by a VirtualIP in another namespace; request a free address or release it there"},
	} {
		_, err := a.Allocate(tc.key, Request{Families: v4, IPs: addrs(tc.ip)})
		if !errors.Is(err, ErrInUse) || err.Error() != tc.want {
			t.Errorf("%s asking for %s: %q, want %q", tc.key, tc.ip, err, tc.want)
		}
	}
	for _, tc := range []struct{ key, holder, want string }{
		{"a/x", "unowned 192.0.2.7", "unowned 192.0.2.7"},
		{"a/x", "a/y", "a/y"},
		{"ab/x", "a/y", "a Service in another namespace"},
	} {
		if got := holderName(tc.key, tc.holder); got != tc.want {
			t.Errorf("holderName(%q, %q) = %q, want %q", tc.key, tc.holder, got, tc.want)
		}
	}
}
