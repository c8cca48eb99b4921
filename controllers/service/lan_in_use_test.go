package service

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
)

func TestLANRecords(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	inUse := metav1.Condition{Type: paasv1.IPConditionInUseOnLAN, Status: metav1.ConditionTrue, LastTransitionTime: t0,
		Message: "02:00:00:00:00:cc answered the ARP probe node node1 sent on eth0 for 192.0.2.1"}
	silent := metav1.Condition{Type: paasv1.IPConditionInUseOnLAN, Status: metav1.ConditionFalse, LastTransitionTime: t0}
	owner := &paasv1.IPOwner{Namespace: "default", Name: "web", UID: "u1"}
	for _, tc := range []struct {
		desc   string
		ip     paasv1.IP
		record bool
		who    string // "" when not in use; else a part of it
	}{
		{"a Service's address a host answered for", paasv1.IP{Spec: paasv1.IPSpec{Owner: owner}, Status: paasv1.IPStatus{Conditions: []metav1.Condition{inUse}}},
			false, "the host with MAC 02:00:00:00:00:cc (since 2026-01-01T00:00:00Z)"},
		{"left by its Service: a record", paasv1.IP{Status: paasv1.IPStatus{Conditions: []metav1.Condition{inUse}}}, true, "02:00:00:00:00:cc"},
		{"a record cleared by a silent recheck", paasv1.IP{Status: paasv1.IPStatus{Conditions: []metav1.Condition{silent}}}, true, ""},
		{"announced: never in use by this account", paasv1.IP{Spec: paasv1.IPSpec{Owner: owner},
			Status: paasv1.IPStatus{AnnouncedBy: []string{"node1"}, Conditions: []metav1.Condition{inUse}}}, false, ""},
		{"the original operator's object, no spec.owner", paasv1.IP{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{paasv1.OwnerAnnotation: "default/web"}},
			Status: paasv1.IPStatus{Conditions: []metav1.Condition{inUse}}}, false, "02:00:00:00:00:cc"},
		{"no verdict", paasv1.IP{}, false, ""},
	} {
		if got := ledger.IsLANRecord(&tc.ip); got != tc.record {
			t.Errorf("%s: record %v, want %v", tc.desc, got, tc.record)
		}
		who := inUseOnLANWho(&tc.ip)
		if (who == "") != (tc.who == "") || !strings.Contains(who, tc.who) {
			t.Errorf("%s: in use by %q, want %q", tc.desc, who, tc.who)
		}
	}
}

// TestNewlyFlooding: a group is told of a MAC once, when it first passes the
// bound, not on every answer after.
func TestNewlyFlooding(t *testing.T) {
	for _, tc := range []struct {
		desc          string
		before, after map[string][]string
		want          map[string][]string
	}{
		{"nothing", map[string][]string{}, map[string][]string{}, map[string][]string{}},
		{"a MAC passes the bound", map[string][]string{}, map[string][]string{"lan": {"aa"}}, map[string][]string{"lan": {"aa"}}},
		{"it answers again", map[string][]string{"lan": {"aa"}}, map[string][]string{"lan": {"aa"}}, map[string][]string{}},
		{"another in another group", map[string][]string{"lan": {"aa"}}, map[string][]string{"lan": {"aa"}, "dmz": {"aa"}}, map[string][]string{"dmz": {"aa"}}},
		{"one falls back under it", map[string][]string{"lan": {"aa"}}, map[string][]string{}, map[string][]string{}},
	} {
		if got := newlyFlooding(tc.before, tc.after); !maps.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("%s: %v, want %v", tc.desc, got, tc.want)
		}
	}
}
