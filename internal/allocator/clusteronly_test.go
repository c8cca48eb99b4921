package allocator

import (
	"errors"
	"strings"
	"testing"
)

// TestClusterPolicyOnlyGroups: a group that advertises covering routes serves
// Services with externalTrafficPolicy Cluster only; a Local one is refused by
// name and by address with the fix, and auto-assignment passes it by.
func TestClusterPolicyOnlyGroups(t *testing.T) {
	groups := []Group{
		{Name: "aggregated", Segment: pfx("203.0.113.128/28"), AutoAssign: true, Priority: 1, ClusterPolicyOnly: true},
		{Name: "hosts", Segment: pfx("198.51.100.0/28"), AutoAssign: true, Priority: 2},
	}
	runSteps(t, []step{
		{desc: "Cluster: the aggregated group first", groups: groups, key: "web", req: Request{Families: v4}, want: []string{"203.0.113.128"}},
		{desc: "Local: auto-assignment passes it by", key: "api", req: Request{Families: v4, LocalPolicy: true}, want: []string{"198.51.100.0"}},
		{desc: "Local naming it: refused", key: "db", req: Request{Families: v4, LocalPolicy: true, Groups: []string{"aggregated"}}, wantErr: ErrGroupNotAllowed},
		{desc: "Local asking for one of its addresses: refused", key: "db", req: Request{Families: v4, LocalPolicy: true, IPs: addrs("203.0.113.140")}, wantErr: ErrGroupNotAllowed},
		{desc: "Cluster naming it", key: "db", req: Request{Families: v4, Groups: []string{"aggregated"}}, want: []string{"203.0.113.129"}},
	})
	a := New()
	a.SetGroups([]*Group{mustGroup(t, groups[0])})
	for _, req := range []Request{
		{Families: v4, LocalPolicy: true, Groups: []string{"aggregated"}},
		{Families: v4, LocalPolicy: true, IPs: addrs("203.0.113.140")},
	} {
		_, err := a.Allocate("ns/local", req)
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, ErrGroupNotAllowed) || !strings.Contains(e.Msg, "aggregationLength") || !strings.Contains(e.Msg, "set the Service's policy to Cluster") {
			t.Errorf("%+v: %v, want GroupNotAllowed naming aggregationLength and the fix", req, err)
		}
	}
}
