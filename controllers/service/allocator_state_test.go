package service

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
)

// A ledger object's event spares its holder a reconcile only when it shows
// exactly the write that holder's reconcile made and settled; anything else
// (a later change by someone else, a write that wants another look, a holder
// that wrote nothing) reconciles it.
func TestLedgerSeenSparesOnlyTheSettledWrite(t *testing.T) {
	web := paasv1.IPOwner{Namespace: "shop", Name: "web", UID: "uid-web"}
	dns := paasv1.IPOwner{Namespace: "shop", Name: "dns", UID: "uid-dns"}
	object := func(rv string, holders ...paasv1.IPOwner) *paasv1.IP {
		ip := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "ipv4-203-0-113-7", ResourceVersion: rv}}
		ip.Spec.Owner = &holders[0]
		ip.Spec.SharedWith = holders[1:]
		return ip
	}
	type write struct {
		owner   types.UID
		settled string
	}
	for _, tc := range []struct {
		desc   string
		writes []write
		seen   *paasv1.IP
		want   []types.NamespacedName
	}{
		{"our create, shown as written", []write{{"uid-web", "5"}}, object("5", web), []types.NamespacedName{{Namespace: "shop", Name: "web"}}},
		{"our create, changed by someone since", []write{{"uid-web", "5"}}, object("6", web), nil},
		{"a write that wants another look", []write{{"uid-web", ""}}, object("5", web), nil},
		{"no write of ours", nil, object("5", web), nil},
		{"a shared object: only the holder whose write it shows", []write{{"uid-web", "5"}, {"uid-dns", ""}}, object("5", web, dns), []types.NamespacedName{{Namespace: "shop", Name: "web"}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			a := newAllocatorState()
			for _, w := range tc.writes {
				a.ledgerCreated(tc.seen.Name, w.owner, w.settled)
			}
			if got := a.ledgerSeen(tc.seen); !slices.Equal(got, tc.want) {
				t.Errorf("settled %v, want %v", got, tc.want)
			}
			for _, h := range ledger.Holders(tc.seen) {
				if a.ledgerInFlight(tc.seen.Name, h.UID) {
					t.Errorf("%s's write still in flight after the cache showed it", h.Name)
				}
			}
		})
	}
}

// An address the rebuild cannot give the holder the ledger names (a status
// gave it to another Service first, or a VirtualIP's is a Service's too) is
// not imported for it, and each such conflict is counted by its source.
func TestImportConflictsCounted(t *testing.T) {
	addr := netip.MustParseAddr("192.0.2.7")
	ledgerBefore := testutil.ToFloat64(importConflicts.WithLabelValues(importSourceLedger))
	legacyBefore := testutil.ToFloat64(importConflicts.WithLabelValues(importSourceVirtualIP))
	a := newAllocatorState()
	if err := a.alloc.Assign("shop/status-holder", addr); err != nil {
		t.Fatal(err)
	}
	owned := func(name string) paasv1.IP {
		ip := paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: name}}
		ip.Spec.Owner = &paasv1.IPOwner{Namespace: "shop", Name: "gone", UID: "uid-gone"}
		return ip
	}
	a.importLedger(logr.Discard(), []paasv1.IP{owned("192.0.2.7"), owned("192.0.2.8")})
	vip := paasv1.VirtualIP{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "old"}}
	vip.Status.IP = "192.0.2.7"
	a.importLegacy(logr.Discard(), []paasv1.VirtualIP{vip})

	if got := a.alloc.Holders(addr); !slices.Equal(got, []string{"shop/status-holder"}) {
		t.Errorf("holders of %s: %v, want the status's only", addr, got)
	}
	if got := a.alloc.Holders(netip.MustParseAddr("192.0.2.8")); !slices.Equal(got, []string{"shop/gone"}) {
		t.Errorf("holders of 192.0.2.8: %v, want the ledger's", got)
	}
	if got := testutil.ToFloat64(importConflicts.WithLabelValues(importSourceLedger)) - ledgerBefore; got != 1 {
		t.Errorf("ledger conflicts counted: %v, want 1", got)
	}
	if got := testutil.ToFloat64(importConflicts.WithLabelValues(importSourceVirtualIP)) - legacyBefore; got != 1 {
		t.Errorf("VirtualIP conflicts counted: %v, want 1", got)
	}
}
