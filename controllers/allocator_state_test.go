package controllers

import (
	"slices"
	"testing"

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
