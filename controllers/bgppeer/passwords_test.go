package bgppeer

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// TestDecidePasswords is a scenario: each step observes the peers' Secrets
// and the agents' Secret as the previous step left it (as the operator reads
// it back after a restart), so a kept password must survive step after step.
func TestDecidePasswords(t *testing.T) {
	ref := &paasv1.SecretKeyRef{Name: "tor-auth", Key: "password"}
	other := &paasv1.SecretKeyRef{Name: "tor-auth-2", Key: "pw"}
	valid := func(pw string) peerPassword {
		return peerPassword{peer: "tor", ref: ref, state: secretValid, value: []byte(pw)}
	}
	broken := func(s secretState) peerPassword { return peerPassword{peer: "tor", ref: ref, state: s} }
	steps := []struct {
		desc       string
		peers      []peerPassword
		want       map[string]string
		wantReason string // "" : no problem
		wantKept   bool
		wantText   []string
	}{
		{desc: "Secret missing before any copy: no password, peer not used", peers: []peerPassword{broken(secretNotFound)},
			want: map[string]string{}, wantReason: paasv1.ReasonPasswordSecretNotFound, wantText: []string{"ops/tor-auth", "does not exist", "create it"}},
		{desc: "Secret created: copied", peers: []peerPassword{valid("s3cret")}, want: map[string]string{"tor": "s3cret"}},
		{desc: "Secret deleted: last good kept", peers: []peerPassword{broken(secretNotFound)},
			want: map[string]string{"tor": "s3cret"}, wantReason: paasv1.ReasonPasswordSecretMissingKeptLastGood, wantKept: true,
			wantText: []string{"ops/tor-auth", "does not exist", "keep the password last copied", "remove spec.passwordSecret"}},
		{desc: "still deleted on the next pass (or after a restart): still kept", peers: []peerPassword{broken(secretNotFound)},
			want: map[string]string{"tor": "s3cret"}, wantReason: paasv1.ReasonPasswordSecretMissingKeptLastGood, wantKept: true},
		{desc: "re-created without its label: still kept", peers: []peerPassword{broken(secretNotLabelled)},
			want: map[string]string{"tor": "s3cret"}, wantReason: paasv1.ReasonPasswordSecretNotLabelledKeptLastGood, wantKept: true,
			wantText: []string{paasv1.BGPPasswordLabel}},
		{desc: "labelled, but the key renamed: still kept", peers: []peerPassword{broken(secretNoKey)},
			want: map[string]string{"tor": "s3cret"}, wantReason: paasv1.ReasonPasswordSecretMissingKeptLastGood, wantKept: true,
			wantText: []string{`no key "password"`}},
		{desc: "re-created valid with a new value: the new value", peers: []peerPassword{valid("rotated")}, want: map[string]string{"tor": "rotated"}},
		{desc: "pointed at another Secret that is not valid: the last good kept", peers: []peerPassword{{peer: "tor", ref: other, state: secretNotFound}},
			want: map[string]string{"tor": "rotated"}, wantReason: paasv1.ReasonPasswordSecretMissingKeptLastGood, wantKept: true,
			wantText: []string{"ops/tor-auth-2"}},
		{desc: "pointed at a valid Secret: its password", peers: []peerPassword{{peer: "tor", ref: other, state: secretValid, value: []byte("new")}},
			want: map[string]string{"tor": "new"}},
		{desc: "Secret deleted again: kept", peers: []peerPassword{{peer: "tor", ref: other, state: secretNotFound}},
			want: map[string]string{"tor": "new"}, wantReason: paasv1.ReasonPasswordSecretMissingKeptLastGood, wantKept: true},
		{desc: "passwordSecret removed: dropped", peers: []peerPassword{{peer: "tor"}}, want: map[string]string{}},
		{desc: "passwordSecret set again to a missing Secret: nothing to keep", peers: []peerPassword{broken(secretNotFound)},
			want: map[string]string{}, wantReason: paasv1.ReasonPasswordSecretNotFound},
		{desc: "an unlabelled Secret never copied: nothing copied out of it", peers: []peerPassword{broken(secretNotLabelled)},
			want: map[string]string{}, wantReason: paasv1.ReasonPasswordSecretNotLabelled, wantText: []string{"nothing is copied"}},
		{desc: "valid again", peers: []peerPassword{valid("back")}, want: map[string]string{"tor": "back"}},
		{desc: "peer deleted (gone from the list): dropped", peers: nil, want: map[string]string{}},
	}
	copied := map[string][]byte{}
	for _, s := range steps {
		d := decidePasswords(passwordsObserved{namespace: "ops", peers: s.peers, copied: copied})
		got := map[string]string{}
		for k, v := range d.want {
			got[k] = string(v)
		}
		if len(got) != len(s.want) {
			t.Fatalf("%s: want %v, got %v", s.desc, s.want, got)
		}
		for k, v := range s.want {
			if got[k] != v {
				t.Fatalf("%s: want %v, got %v", s.desc, s.want, got)
			}
		}
		p := d.problems["tor"]
		if p.reason != s.wantReason || p.kept != s.wantKept {
			t.Fatalf("%s: want reason %q kept %v, got %+v", s.desc, s.wantReason, s.wantKept, p)
		}
		for _, text := range s.wantText {
			if !strings.Contains(p.message, text) {
				t.Errorf("%s: message %q lacks %q", s.desc, p.message, text)
			}
		}
		copied = d.want
	}
}

// TestDecidePasswordsPeersApart: one peer's broken Secret changes nothing for
// another's.
func TestDecidePasswordsPeersApart(t *testing.T) {
	d := decidePasswords(passwordsObserved{namespace: "ops",
		peers: []peerPassword{
			{peer: "a", ref: &paasv1.SecretKeyRef{Name: "a", Key: "k"}, state: secretNotFound},
			{peer: "b", ref: &paasv1.SecretKeyRef{Name: "b", Key: "k"}, state: secretValid, value: []byte("b2")},
			{peer: "c"},
		},
		copied: map[string][]byte{"a": []byte("a1"), "b": []byte("b1"), "c": []byte("c1")}})
	if string(d.want["a"]) != "a1" || string(d.want["b"]) != "b2" || len(d.want) != 2 {
		t.Fatalf("want a kept, b replaced, c dropped; got %q", d.want)
	}
	if !d.problems["a"].kept || len(d.problems) != 1 {
		t.Fatalf("want only a's problem, kept; got %+v", d.problems)
	}
}

// TestKeptPasswordCondition: a kept password leaves the peer Accepted (the
// agents use it) with the reason that asks for a fix, and one Warning Event
// per change of the condition, not per reconcile.
func TestKeptPasswordCondition(t *testing.T) {
	events := record.NewFakeRecorder(10)
	r := &Reconciler{Recorder: events}
	peer := &paasv1.BGPPeer{}
	kept := passwordProblem{reason: paasv1.ReasonPasswordSecretMissingKeptLastGood, message: "Secret ops/a does not exist: ...", kept: true}
	steps := []struct {
		desc       string
		problem    passwordProblem
		nodes      int
		wantStatus metav1.ConditionStatus
		wantReason string
		wantEvent  bool
	}{
		{desc: "kept: True, an Event", problem: kept, nodes: 2, wantStatus: metav1.ConditionTrue, wantReason: kept.reason, wantEvent: true},
		{desc: "still kept: no second Event", problem: kept, nodes: 2, wantStatus: metav1.ConditionTrue, wantReason: kept.reason},
		{desc: "unlabelled now: a new Event", problem: passwordProblem{reason: paasv1.ReasonPasswordSecretNotLabelledKeptLastGood, message: "lacks the label", kept: true},
			nodes: 2, wantStatus: metav1.ConditionTrue, wantReason: paasv1.ReasonPasswordSecretNotLabelledKeptLastGood, wantEvent: true},
		{desc: "valid again", nodes: 2, wantStatus: metav1.ConditionTrue, wantReason: paasv1.ReasonPeerAccepted},
		{desc: "not found, nothing kept: False", problem: passwordProblem{reason: paasv1.ReasonPasswordSecretNotFound, message: "does not exist"},
			nodes: 2, wantStatus: metav1.ConditionFalse, wantReason: paasv1.ReasonPasswordSecretNotFound},
		{desc: "kept, but no node peers: NoNodes", problem: kept, wantStatus: metav1.ConditionFalse, wantReason: paasv1.ReasonNoNodes},
	}
	for _, s := range steps {
		c := acceptedCondition(peer, s.problem, s.nodes)
		r.warnKeptPassword(peer, c)
		if c.Status != s.wantStatus || c.Reason != s.wantReason {
			t.Fatalf("%s: want %s %s, got %s %s", s.desc, s.wantStatus, s.wantReason, c.Status, c.Reason)
		}
		select {
		case e := <-events.Events:
			if !s.wantEvent || !strings.HasPrefix(e, "Warning "+paasv1.EventPasswordKeptLastGood) {
				t.Fatalf("%s: unexpected Event %q", s.desc, e)
			}
		default:
			if s.wantEvent {
				t.Fatalf("%s: no Event", s.desc)
			}
		}
		meta.SetStatusCondition(&peer.Status.Conditions, c)
	}
}
