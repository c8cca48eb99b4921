package service

import (
	"errors"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
)

func TestIPAllocatedCondition(t *testing.T) {
	require, prefer := corev1.IPFamilyPolicyRequireDualStack, corev1.IPFamilyPolicyPreferDualStack
	held := []netip.Addr{netip.MustParseAddr("192.0.2.1")}
	groupOf := func(netip.Addr) string { return "g" }
	noV6 := &allocator.Error{Reason: allocator.ErrNoGroup, Msg: "no auto-assign IPv6 IPGroup admits this Service"}
	tooManyPorts := &allocator.Error{Reason: allocator.ErrSharedTooManyPorts, Msg: "192.0.2.1 is shared under key \"k\" by 1 Services with 30000 ports"}
	inUse := &allocator.Error{Reason: allocator.ErrInUse, Msg: "requested 192.0.2.9 is already held by ns/x"}
	leased := &allocator.Error{Reason: allocator.ErrLeased, Msg: "requested 192.0.2.9 was released by the Service that had asked for it and is kept for that Service until 2030-01-01T12:05:00Z"}
	for _, tc := range []struct {
		desc        string
		policy      *corev1.IPFamilyPolicy
		held        []netip.Addr
		err         error
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		{"allocated", nil, held, nil, "True", paasv1.ReasonAllocated, "holds 192.0.2.1 from IPGroup g"},
		{"nothing held", nil, nil, noV6, "False", paasv1.ReasonNoIPGroup, "no auto-assign IPv6 IPGroup admits this Service"},
		{"PreferDualStack with one family is served", &prefer, held, noV6, "True", paasv1.ReasonAllocated,
			"holds 192.0.2.1 from IPGroup g; other family: no auto-assign IPv6 IPGroup admits this Service"},
		{"RequireDualStack with one family is not, and says what to do", &require, held, noV6, "False", paasv1.ReasonNoIPGroup,
			"ipFamilyPolicy RequireDualStack needs an IPv4 and an IPv6 address, and only IPv4 was allocated: no auto-assign IPv6 IPGroup admits this Service; or set ipFamilyPolicy PreferDualStack to be served by IPv4 alone (keeps 192.0.2.1 from IPGroup g meanwhile)"},
		{"RequireDualStack with nothing held names the failures only", &require, nil, noV6, "False", paasv1.ReasonNoIPGroup,
			"no auto-assign IPv6 IPGroup admits this Service"},
		{"a failed request is reported even while an address is held", &prefer, held, inUse, "False", paasv1.ReasonRequestedIPInUse,
			"requested 192.0.2.9 is already held by ns/x (keeps 192.0.2.1 from IPGroup g meanwhile)"},
		{"joined errors report the first reason", nil, nil, errors.Join(inUse, noV6), "False", paasv1.ReasonRequestedIPInUse,
			"requested 192.0.2.9 is already held by ns/x; no auto-assign IPv6 IPGroup admits this Service"},
		{"too many ports on a shared address is reported while it is kept", nil, held, tooManyPorts, "False", paasv1.ReasonSharedTooManyPorts,
			"192.0.2.1 is shared under key \"k\" by 1 Services with 30000 ports (keeps 192.0.2.1 from IPGroup g meanwhile)"},
		{"a leased request is reported even while an address is held", &prefer, held, leased, "False", paasv1.ReasonRequestedIPLeased,
			"requested 192.0.2.9 was released by the Service that had asked for it and is kept for that Service until 2030-01-01T12:05:00Z (keeps 192.0.2.1 from IPGroup g meanwhile)"},
		{"a request error without a sentinel", nil, nil, errors.New("bad annotation"), "False", paasv1.ReasonInvalidRequest, "bad annotation"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			svc := &corev1.Service{Spec: corev1.ServiceSpec{IPFamilyPolicy: tc.policy}}
			c := ipAllocatedCondition(svc, tc.held, groupOf, tc.err)
			if c.Status != tc.wantStatus || c.Reason != tc.wantReason || c.Message != tc.wantMessage {
				t.Fatalf("got %s/%s %q", c.Status, c.Reason, c.Message)
			}
		})
	}
}
