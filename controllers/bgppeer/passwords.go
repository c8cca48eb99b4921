package bgppeer

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/internal/managedby"
)

// The BGP passwords are handed to the agents in three steps: observe reads
// every peer's password Secret and the agents' Secret once, decidePasswords
// (pure) says what the agents' Secret must hold and what is wrong with each
// peer, and writeAgentsPasswords makes the one write.
//
// An admin's slip on a password Secret (deleted, re-created without its
// label, a key renamed) must not take every session to the router down: the
// agents would stop peering with it. So a peer keeps the password last copied
// for it until the admin says otherwise in the BGPPeer itself: removing
// spec.passwordSecret drops it, a valid Secret replaces it. The password last
// copied is read back from the agents' Secret, so the operator needs no memory
// of its own and a restart forgets nothing.

// secretState is what the Secret a BGPPeer's passwordSecret names holds.
type secretState int

const (
	secretValid secretState = iota
	secretNotFound
	secretNotLabelled
	secretNoKey
)

// peerPassword is what the operator observes of one BGPPeer's password.
type peerPassword struct {
	peer string
	// ref is spec.passwordSecret; nil when the peer wants no password or is
	// being deleted.
	ref   *paasv1.SecretKeyRef
	state secretState
	value []byte // the password, when state is secretValid
}

// passwordsObserved is everything decidePasswords needs.
type passwordsObserved struct {
	namespace string
	peers     []peerPassword
	// copied is the agents' Secret's data: the password last copied for each
	// peer, by peer name.
	copied map[string][]byte
}

// passwordProblem is why a BGPPeer's password Secret cannot be used: a
// condition reason and a message that names the fix.
type passwordProblem struct {
	reason, message string
	// kept: the agents keep the password last copied for the peer, so they
	// still peer with the router (Accepted stays True).
	kept bool
}

// passwordsDecision is what the agents' Secret must hold, and what is wrong
// with each peer's password Secret.
type passwordsDecision struct {
	want     map[string][]byte
	problems map[string]passwordProblem
}

// decidePasswords copies each valid Secret's password, keeps the last copied
// one of a peer whose Secret is not valid (any more), and drops the password
// of a peer that asks for none.
func decidePasswords(o passwordsObserved) passwordsDecision {
	d := passwordsDecision{want: map[string][]byte{}, problems: map[string]passwordProblem{}}
	for _, p := range o.peers {
		if p.ref == nil {
			continue
		}
		if p.state == secretValid {
			d.want[p.peer] = p.value
			continue
		}
		last, kept := o.copied[p.peer]
		kept = kept && len(last) > 0
		if kept {
			d.want[p.peer] = last
		}
		d.problems[p.peer] = passwordProblemOf(o.namespace, p, kept)
	}
	return d
}

// passwordProblemOf says what is wrong with p's Secret and what to do.
func passwordProblemOf(namespace string, p peerPassword, kept bool) passwordProblem {
	secret := namespace + "/" + p.ref.Name
	var what string
	switch p.state {
	case secretNotFound:
		what = fmt.Sprintf("Secret %s (spec.passwordSecret) does not exist", secret)
	case secretNoKey:
		what = fmt.Sprintf("Secret %s has no key %q (spec.passwordSecret.key)", secret, p.ref.Key)
	case secretNotLabelled:
		what = fmt.Sprintf("Secret %s (spec.passwordSecret) lacks the label %s: \"true\"", secret, paasv1.BGPPasswordLabel)
	}
	if kept {
		reason := paasv1.ReasonPasswordSecretMissingKeptLastGood
		if p.state == secretNotLabelled {
			reason = paasv1.ReasonPasswordSecretNotLabelledKeptLastGood
		}
		return passwordProblem{reason: reason, kept: true, message: fmt.Sprintf("%s: the agents keep the password last copied for this peer, so the sessions stay up. "+
			"Restore the Secret (label %s: \"true\", the password under key %q), point spec.passwordSecret at another such Secret to change the password, "+
			"or remove spec.passwordSecret to peer without one", what, paasv1.BGPPasswordLabel, p.ref.Key)}
	}
	switch p.state {
	case secretNotLabelled:
		// Only a Secret made for it: a BGPPeer must not be a way to copy
		// another Secret of the namespace (the gossip key) to every agent.
		return passwordProblem{reason: paasv1.ReasonPasswordSecretNotLabelled,
			message: what + ": nothing is copied out of it; label it if it holds this session's password"}
	case secretNoKey:
		return passwordProblem{reason: paasv1.ReasonPasswordSecretNotFound, message: what + ": add the password under that key"}
	default:
		return passwordProblem{reason: paasv1.ReasonPasswordSecretNotFound, message: fmt.Sprintf("%s: create it with the session's password under key %q and the label %s: \"true\"; the agents do not peer with the router until then",
			what, p.ref.Key, paasv1.BGPPasswordLabel)}
	}
}

// observePasswords reads the Secret each peer's passwordSecret names, and the
// agents' Secret (nil when it does not exist yet).
func (r *Reconciler) observePasswords(ctx context.Context, peers []paasv1.BGPPeer) (passwordsObserved, *corev1.Secret, error) {
	o := passwordsObserved{namespace: r.Namespace}
	for _, p := range peers {
		obs := peerPassword{peer: p.Name}
		if ref := p.Spec.PasswordSecret; ref != nil && p.DeletionTimestamp.IsZero() {
			obs.ref = ref
			var s corev1.Secret
			err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: ref.Name}, &s)
			switch {
			case apierrors.IsNotFound(err):
				obs.state = secretNotFound
			case err != nil:
				return o, nil, fmt.Errorf("read password Secret %s/%s of BGPPeer %s: %w", r.Namespace, ref.Name, p.Name, err)
			case s.Labels[paasv1.BGPPasswordLabel] != "true":
				obs.state = secretNotLabelled
			case len(s.Data[ref.Key]) == 0:
				obs.state = secretNoKey
			default:
				obs.state, obs.value = secretValid, s.Data[ref.Key]
			}
		}
		o.peers = append(o.peers, obs)
	}
	var cur corev1.Secret
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: paasv1.BGPPasswordsSecret}, &cur)
	switch {
	case apierrors.IsNotFound(err):
		return o, nil, nil
	case err != nil:
		return o, nil, fmt.Errorf("read Secret %s/%s: %w", r.Namespace, paasv1.BGPPasswordsSecret, err)
	}
	o.copied = cur.Data
	return o, &cur, nil
}

// syncPasswords copies every peer's password into paasv1.BGPPasswordsSecret
// and returns, per peer, what is wrong with its password Secret.
func (r *Reconciler) syncPasswords(ctx context.Context, peers []paasv1.BGPPeer) (map[string]passwordProblem, error) {
	o, cur, err := r.observePasswords(ctx, peers)
	if err != nil {
		return nil, err
	}
	d := decidePasswords(o)
	if err := r.writeAgentsPasswords(ctx, cur, d.want); err != nil {
		return nil, err
	}
	return d.problems, nil
}

// writeAgentsPasswords makes the agents' Secret (cur, nil when absent) hold
// want. A stale cache cannot lose a password: the update carries cur's
// resourceVersion, and a conflict is retried with a fresh read.
func (r *Reconciler) writeAgentsPasswords(ctx context.Context, cur *corev1.Secret, want map[string][]byte) error {
	if cur == nil {
		if len(want) == 0 {
			return nil
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: paasv1.BGPPasswordsSecret,
			Labels: map[string]string{managedby.Label: managedby.Operator}}, Type: corev1.SecretTypeOpaque, Data: want}
		if err := r.Client.Create(ctx, s); err != nil {
			return fmt.Errorf("create Secret %s/%s: %w", r.Namespace, paasv1.BGPPasswordsSecret, err)
		}
		return nil
	}
	if maps.EqualFunc(cur.Data, want, func(a, b []byte) bool { return string(a) == string(b) }) {
		return nil
	}
	cur.Data = want
	if err := r.Client.Update(ctx, cur); err != nil {
		return fmt.Errorf("update Secret %s/%s: %w", r.Namespace, paasv1.BGPPasswordsSecret, err)
	}
	return nil
}
