package bgppeer

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

func TestBFDCondition(t *testing.T) {
	withBFD := &paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Generation: 5}, Spec: paasv1.BGPPeerSpec{BFD: &paasv1.BFDSettings{}}}
	session := func(node, state, bfd, msg string) paasv1.BGPSession {
		return paasv1.BGPSession{Node: node, State: state, BFD: bfd, BFDMessage: msg}
	}
	tests := []struct {
		desc       string
		peer       *paasv1.BGPPeer
		selected   []string
		sessions   []paasv1.BGPSession
		wantNone   bool
		wantStatus metav1.ConditionStatus
		wantReason string
		wantText   []string
	}{
		{desc: "no bfd: no condition", peer: &paasv1.BGPPeer{}, selected: []string{"n1"},
			sessions: []paasv1.BGPSession{session("n1", "Established", paasv1.BFDNotConfigured, "")}, wantNone: true},
		{desc: "no session established: unknown", peer: withBFD, selected: []string{"n1"},
			sessions:   []paasv1.BGPSession{session("n1", "Active", paasv1.BFDDown, "")},
			wantStatus: metav1.ConditionUnknown, wantReason: paasv1.ReasonNoEstablishedSession, wantText: []string{"Established condition"}},
		{desc: "all up", peer: withBFD, selected: []string{"n1", "n2"},
			sessions:   []paasv1.BGPSession{session("n1", "Established", paasv1.BFDUp, ""), session("n2", "Established", paasv1.BFDUp, "")},
			wantStatus: metav1.ConditionTrue, wantReason: paasv1.ReasonBFDUp, wantText: []string{"2 of 2"}},
		{desc: "a router without BFD for one node, an old agent on another; a down session is not counted", peer: withBFD, selected: []string{"n1", "n2", "n3", "n4"},
			sessions: []paasv1.BGPSession{session("n1", "Established", paasv1.BFDUp, ""), session("n2", "Established", paasv1.BFDDown, "the router sends no BFD packets"),
				session("n3", "Established", "", ""), session("n4", "Connect", paasv1.BFDDown, "")},
			wantStatus: metav1.ConditionFalse, wantReason: paasv1.ReasonBFDDown,
			wantText: []string{"1 of 3", "n2: Down (the router sends no BFD packets)", "n3: the agent reports no BFD yet", "UDP 3784"}},
		{desc: "a node no longer selected does not count", peer: withBFD, selected: []string{"n1"},
			sessions:   []paasv1.BGPSession{session("n1", "Established", paasv1.BFDUp, ""), session("n9", "Established", paasv1.BFDDown, "")},
			wantStatus: metav1.ConditionTrue, wantReason: paasv1.ReasonBFDUp, wantText: []string{"1 of 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			c, ok := bfdCondition(tt.peer, tt.selected, tt.sessions)
			if ok == tt.wantNone {
				t.Fatalf("condition %+v (present %v), want present %v", c, ok, !tt.wantNone)
			}
			if tt.wantNone {
				return
			}
			if c.Type != paasv1.BGPPeerBFDUp || c.Status != tt.wantStatus || c.Reason != tt.wantReason || c.ObservedGeneration != 5 {
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
