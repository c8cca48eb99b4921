package bgppeer

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

func TestEstablishedCondition(t *testing.T) {
	up := func(node string) paasv1.BGPSession { return paasv1.BGPSession{Node: node, State: "Established"} }
	tests := []struct {
		desc       string
		selected   []string
		sessions   []paasv1.BGPSession
		wantStatus metav1.ConditionStatus
		wantReason string
		wantText   []string
	}{
		{"no node peers", nil, nil, metav1.ConditionFalse, paasv1.ReasonNoNodes, []string{"no node"}},
		{"nothing reported yet", []string{"n1"}, nil, metav1.ConditionFalse, paasv1.ReasonNoSessionYet, []string{"0 of 1"}},
		{"all up", []string{"n1", "n2"}, []paasv1.BGPSession{up("n1"), up("n2")}, metav1.ConditionTrue, paasv1.ReasonAllEstablished, []string{"2 of 2"}},
		{"one down, with its reason; one silent", []string{"n1", "n2", "n3"},
			[]paasv1.BGPSession{up("n1"), {Node: "n2", State: "Active", Message: "cannot connect: i/o timeout"}},
			metav1.ConditionFalse, paasv1.ReasonSessionsDown, []string{"1 of 3", "n2: Active (cannot connect: i/o timeout)", "n3: no session reported yet", "password"}},
		{"a session of a node no longer selected does not count", []string{"n1"}, []paasv1.BGPSession{up("n1"), {Node: "n9", State: "Idle"}},
			metav1.ConditionTrue, paasv1.ReasonAllEstablished, []string{"1 of 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			c := establishedCondition(4, tt.selected, tt.sessions)
			if c.Type != paasv1.BGPPeerEstablished || c.Status != tt.wantStatus || c.Reason != tt.wantReason || c.ObservedGeneration != 4 {
				t.Errorf("condition %+v, want %s %s", c, tt.wantStatus, tt.wantReason)
			}
			for _, text := range tt.wantText {
				if !strings.Contains(c.Message, text) {
					t.Errorf("message %q lacks %q", c.Message, text)
				}
			}
		})
	}
}
