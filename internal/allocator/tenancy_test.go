package allocator

import (
	"errors"
	"strings"
	"testing"
)

func TestOverlappingGroupsFenceTheirSegments(t *testing.T) {
	onlyTeamA := func(ns, _ map[string]string) bool { return ns["team"] == "a" }
	// "shared" is open to all and overlaps "team-a", which only team a may use:
	// the overlap (192.0.2.0/28) goes to team a only, whichever group it comes from.
	groups := []Group{
		{Name: "shared", Segment: pfx("192.0.2.0/24"), AutoAssign: true},
		{Name: "team-a", Segment: pfx("192.0.2.0/28"), Excluded: pfxs("192.0.2.4/30"), AutoAssign: true, Priority: 10, Admits: onlyTeamA},
	}
	teamA := map[string]string{"team": "a"}
	runSteps(t, []step{
		{desc: "another team's Service skips team a's part of the shared group", groups: groups, key: "b/one", req: Request{Families: v4}, want: []string{"192.0.2.4"}},
		{desc: "the addresses team-a excludes are not fenced, the rest is", key: "b/two", req: Request{Families: v4}, want: []string{"192.0.2.5"}},
		{desc: "past team-a's exclusion the fence starts again", key: "b/three", req: Request{Families: v4}, want: []string{"192.0.2.6"}},
		{desc: "and ends with team-a's segment", key: "b/four", req: Request{Families: v4}, want: []string{"192.0.2.7"}},
		{desc: "after that it goes on past the fence", key: "b/five", req: Request{Families: v4}, want: []string{"192.0.2.16"}},
		{desc: "team a still gets the fenced addresses from the shared group (the hint did not move past them)", key: "a/one", req: Request{Families: v4, NamespaceLabels: teamA}, want: []string{"192.0.2.0"}},
		{desc: "requesting a fenced address through the open group is refused", key: "b/six", req: Request{Families: v4, IPs: addrs("192.0.2.9")}, wantErr: ErrGroupNotAllowed},
		{desc: "naming the open group does not lift the fence", key: "b/six", req: Request{Families: v4, IPs: addrs("192.0.2.9"), Groups: []string{"shared"}}, wantErr: ErrGroupNotAllowed},
		{desc: "team a may request it", key: "a/two", req: Request{Families: v4, IPs: addrs("192.0.2.9"), NamespaceLabels: teamA}, want: []string{"192.0.2.9"}},
		{desc: "a Service that holds a fenced address keeps it", key: "b/seven", assign: []string{"192.0.2.10"}, want: []string{"192.0.2.10"}},
		{desc: "and reconciling it does not move it", key: "b/seven", req: Request{Families: v4}, want: []string{"192.0.2.10"}},
	})
}

func TestFenceMessageNamesTheGroup(t *testing.T) {
	a := New()
	a.SetGroups([]*Group{
		mustGroup(t, Group{Name: "shared", Segment: pfx("192.0.2.0/24"), AutoAssign: true}),
		mustGroup(t, Group{Name: "team-a", Segment: pfx("192.0.2.0/28"), Admits: func(ns, _ map[string]string) bool { return ns["team"] == "a" }}),
	})
	_, err := a.Allocate("b/svc", Request{Families: v4, IPs: addrs("192.0.2.3")})
	if !errors.Is(err, ErrGroupNotAllowed) || !strings.Contains(err.Error(), "IPGroup team-a, whose namespaceSelector or serviceSelector does not match") {
		t.Fatalf("error %q: want ErrGroupNotAllowed naming team-a", err)
	}
}
