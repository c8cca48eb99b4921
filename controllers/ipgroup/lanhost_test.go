package ipgroup

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
)

// TestLANHostAnswersMany: the group's condition names a MAC that answered the
// probe for more of its addresses than one host is believed to use, from the
// IP objects' InUseOnLAN verdicts, and goes once it no longer does.
func TestLANHostAnswersMany(t *testing.T) {
	g, err := allocator.NewGroup(allocator.Group{Name: "lan", Segment: netip.MustParsePrefix("192.0.2.0/24"), L2: true})
	if err != nil {
		t.Fatal(err)
	}
	answered := func(mac string, n int) []paasv1.IP {
		var out []paasv1.IP
		for i := range n {
			ip := paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("192.0.2.%d", i+1)}}
			ip.Status.Conditions = []metav1.Condition{{Type: paasv1.IPConditionInUseOnLAN, Status: metav1.ConditionTrue,
				Reason: paasv1.ReasonProbeAnswered, Message: mac + " answered the ARP probe node node1 sent on eth0"}}
			out = append(out, ip)
		}
		return out
	}
	var st paasv1.IPGroupStatus
	for _, step := range []struct {
		desc string
		ips  []paasv1.IP
		want string // a MAC the condition names; "" for no condition
	}{
		{"a router on one address: no condition", answered("02:00:00:00:00:cc", 1), ""},
		{"as many as the allocator believes: no condition", answered("02:00:00:00:00:cc", allocator.MaxInUseOnLANPerMAC), ""},
		{"one more: the MAC is named", answered("02:00:00:00:00:ee", allocator.MaxInUseOnLANPerMAC+1), "02:00:00:00:00:ee"},
		{"its records deleted: the condition goes", nil, ""},
	} {
		setLANHostAnswersManyCondition(&st, 1, g, countLedger(g, step.ips))
		c := meta.FindStatusCondition(st.Conditions, paasv1.IPGroupLANHostAnswersMany)
		if (c != nil) != (step.want != "") || (c != nil && (c.Reason != paasv1.ReasonOneMACAnswersMany || !strings.Contains(c.Message, step.want))) {
			t.Errorf("%s: condition %+v, want one naming %q", step.desc, c, step.want)
		}
	}
}
