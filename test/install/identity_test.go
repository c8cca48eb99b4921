//go:build envtest

package install

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	agentctrl "github.com/paas-org/vip-allocator-operator/controllers/agent"
	"github.com/paas-org/vip-allocator-operator/nodeagent/announce"
	"github.com/paas-org/vip-allocator-operator/nodeagent/nodes"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestIdentities installs deploy/bundle.yaml and checks, with the real
// credentials, that each identity can do its work and nothing more: each
// agent, with a ServiceAccount token bound to its Pod on a Node (what the
// kubelet gives a DaemonSet pod), writes only its own Node's interfaces
// annotation, its own entries of the ledger and BGPPeer status and its
// condition on Services; the operator, with its ServiceAccount's token, stays
// in its namespace for DaemonSets and Secrets, creates no Secret but the
// agents' two, and patches Services only where its work needs it.
func TestIdentities(t *testing.T) {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	c := startCluster(t)
	c.mustKubectl(t, "create", "namespace", namespace)
	c.mustKubectl(t, "create", "-f", "deploy/bundle.yaml")
	c.waitListable(t, "deploy/bundle.yaml")
	ctx := context.Background()
	admin, err := client.New(c.admin, client.Options{Scheme: paasv1.NewScheme()})
	testenv.Must(t, err)

	agent := c.boundAgents(t, admin, "node-a", "node-b")
	agentA, agentB := agent["node-a"], agent["node-b"]
	waitAgentPolicies(t, admin, agentA)

	t.Run("the API server names the pod's node in the agent's identity", func(t *testing.T) {
		review := &authenticationv1.SelfSubjectReview{}
		testenv.Must(t, agentA.Create(ctx, review))
		u := review.Status.UserInfo
		if u.Username != agentUser || !slices.Equal(u.Extra[testenv.NodeNameExtra], []string{"node-a"}) {
			t.Fatalf("agent identity %s, extra %v: want %s bound to node-a", u.Username, u.Extra, agentUser)
		}
	})

	t.Run("the agent publishes its own Node's interfaces (the agent's own code)", func(t *testing.T) {
		pub := &nodes.InterfacePublisher{Client: agentA, NodeName: "node-a"}
		testenv.Must(t, pub.Publish(ctx))
		n := &corev1.Node{}
		testenv.Must(t, admin.Get(ctx, types.NamespacedName{Name: "node-a"}, n))
		if _, ok := n.Annotations[paasv1.NodeInterfacesAnnotation]; !ok {
			t.Fatalf("node-a has no %s annotation: %v", paasv1.NodeInterfacesAnnotation, n.Annotations)
		}
		// Later changes of the annotation are its own to make, too.
		patchNode(t, agentA, "node-a", func(n *corev1.Node) { n.Annotations[paasv1.NodeInterfacesAnnotation] = "[]" }, "")
	})

	t.Run("the agent may change nothing else on any Node", func(t *testing.T) { testAgentNodeWrites(t, admin, agentA) })

	t.Run("a token bound to no pod names no node, and writes no Node", func(t *testing.T) {
		unbound := c.tokenClient(t, strings.TrimSpace(c.mustKubectl(t, "create", "token", "-n", namespace, agentctrl.ServiceAccount)))
		err := (&nodes.InterfacePublisher{Client: unbound, NodeName: "node-a"}).Publish(ctx)
		if err == nil || !strings.Contains(err.Error(), "names no node") {
			t.Fatalf("want a refusal naming the missing node binding, got %v", err)
		}
	})

	t.Run("Service status: each agent writes only its condition, on Services of every class", func(t *testing.T) {
		testAgentServiceStatus(t, admin, agentA)
	})

	operator := c.tokenClient(t, strings.TrimSpace(c.mustKubectl(t, "create", "token", "-n", namespace, "vip-allocator-operator")))

	t.Run("Services: the operator patches only the original's finalizer and a migration's conversion", func(t *testing.T) {
		testOperatorServiceWrites(t, admin, operator)
	})
	t.Run("ledger status: each agent records only its own node as announcing", func(t *testing.T) {
		testAgentIPStatus(t, operator, agentA, agentB)
	})
	t.Run("IP status: BGP joins only of the writer's node, leaves only of a node the write removes", func(t *testing.T) {
		testAgentBGPHistory(t, operator, agentA, agentB)
	})
	t.Run("IP status: the probe's verdict InUseOnLAN only on addresses never announced", func(t *testing.T) {
		testInUseOnLAN(t, admin, operator, agentA, agentB)
	})
	t.Run("BGPPeer status: each agent writes only its own session entry", func(t *testing.T) { testAgentBGPPeerStatus(t, admin, agent) })
	t.Run("the operator stays in its namespace for DaemonSets and Secrets, and creates no Secret but the agents' two", func(t *testing.T) {
		testOperatorNamespace(t, operator)
	})

	t.Run("kubectl auth can-i --list of each account (docs/install.md)", func(t *testing.T) {
		for _, tc := range []struct{ who, ns string }{{operatorUser, namespace}, {operatorUser, "default"}, {agentUser, namespace}} {
			out := c.mustKubectl(t, "auth", "can-i", "--list", "--as="+tc.who, "-n", tc.ns)
			t.Logf("kubectl auth can-i --list --as=%s -n %s\n%s", tc.who, tc.ns, out)
		}
	})
}

// waitAgentPolicies waits for the bundle's policies: the API server enforces a
// new admission policy once its informer has seen it (a second or so, more on a
// loaded machine); they arrive together, so it waits until one of the agents'
// refuses, with a dry run that changes nothing either way.
func waitAgentPolicies(t *testing.T, admin, agentA client.Client) {
	ctx := context.Background()
	testenv.Eventually(t, settle, "the agents' admission policies are in force", func() error {
		n := &corev1.Node{}
		if err := admin.Get(ctx, types.NamespacedName{Name: "node-b"}, n); err != nil {
			return err
		}
		patch := client.MergeFrom(n.DeepCopy())
		setAnnotation(n, paasv1.NodeInterfacesAnnotation, "[]")
		if err := agentA.Patch(ctx, n, patch, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "may change only its own Node") {
			return fmt.Errorf("node-a's agent writing node-b: %v, want the policy's refusal", err)
		}
		return nil
	})
}

// boundAgents creates the nodes, each with an agent pod as the DaemonSet would
// place it, and returns a client per node with that pod's bound token (no
// kubelet runs here: the pods stay pending, their tokens are real).
func (c *cluster) boundAgents(t *testing.T, admin client.Client, nodes ...string) map[string]client.Client {
	ctx := context.Background()
	agent := map[string]client.Client{}
	for _, node := range nodes {
		testenv.Must(t, admin.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node,
			Labels:      map[string]string{"topology.kubernetes.io/zone": "z1"},
			Annotations: map[string]string{"owner.example/rack": "r1"}}}))
		pod := agentPod(namespace, node, "registry.example/vip-allocator:test")
		testenv.Must(t, admin.Create(ctx, pod))
		token := c.mustKubectl(t, "create", "token", "-n", namespace, agentctrl.ServiceAccount,
			"--bound-object-kind", "Pod", "--bound-object-name", pod.Name)
		agent[node] = c.tokenClient(t, strings.TrimSpace(token))
	}
	return agent
}

// testAgentNodeWrites: node-a's agent changes nothing on any Node but its own
// Node's interfaces annotation.
func testAgentNodeWrites(t *testing.T, admin, agentA client.Client) {
	ctx := context.Background()
	for _, tc := range []struct {
		desc, node string
		mutate     func(*corev1.Node)
		refusal    string
	}{
		{"another Node's interfaces annotation", "node-b",
			func(n *corev1.Node) { setAnnotation(n, paasv1.NodeInterfacesAnnotation, `[{"name":"eth0"}]`) }, "may change only its own Node, not node-b"},
		{"the agent's own code, for another node", "", nil, "may change only its own Node, not node-b"},
		{"a NoExecute taint on its own Node", "node-a", func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "evil", Effect: corev1.TaintEffectNoExecute})
		}, "may not change the spec"},
		{"cordoning its own Node", "node-a", func(n *corev1.Node) { n.Spec.Unschedulable = true }, "may not change the spec"},
		{"its own Node's labels", "node-a", func(n *corev1.Node) { n.Labels["topology.kubernetes.io/zone"] = "z2" }, "labels"},
		{"a new label on its own Node", "node-a", func(n *corev1.Node) { n.Labels["node-role.kubernetes.io/control-plane"] = "" }, "labels"},
		{"another annotation of its own Node", "node-a", func(n *corev1.Node) { n.Annotations["owner.example/rack"] = "r9" }, "only the annotation vip.paas.org/interfaces"},
		{"its own Node's BGP ASN (what the node peers as is the admin's or the kubelet's word)", "node-a",
			func(n *corev1.Node) { setAnnotation(n, paasv1.NodeBGPASNAnnotation, "64601") }, "only the annotation vip.paas.org/interfaces"},
		{"removing another annotation of its own Node", "node-a", func(n *corev1.Node) { delete(n.Annotations, "owner.example/rack") }, "only the annotation vip.paas.org/interfaces"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if tc.mutate == nil {
				err := (&nodes.InterfacePublisher{Client: agentA, NodeName: "node-b"}).Publish(ctx)
				if err == nil || !strings.Contains(err.Error(), tc.refusal) {
					t.Fatalf("node-a's agent publishing for node-b: %v, want a refusal with %q", err, tc.refusal)
				}
				return
			}
			patchNode(t, agentA, tc.node, tc.mutate, tc.refusal)
		})
	}
	n := &corev1.Node{}
	testenv.Must(t, admin.Get(ctx, types.NamespacedName{Name: "node-b"}, n))
	if _, ok := n.Annotations[paasv1.NodeInterfacesAnnotation]; ok || slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "evil" }) {
		t.Fatalf("node-b changed: %v %v", n.Annotations, n.Spec.Taints)
	}
	testenv.Must(t, admin.Get(ctx, types.NamespacedName{Name: "node-a"}, n))
	if n.Spec.Unschedulable || n.Labels["topology.kubernetes.io/zone"] != "z1" || n.Annotations["owner.example/rack"] != "r1" ||
		slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "evil" }) {
		t.Fatalf("node-a changed: %+v", n)
	}
}

// testAgentIPStatus: each agent records only its own node as announcing an IP.
func testAgentIPStatus(t *testing.T, operator, agentA, agentB client.Client) {
	ctx := context.Background()
	ip := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.10"},
		Spec: paasv1.IPSpec{Address: "192.0.2.10", Owner: &paasv1.IPOwner{Namespace: "default", Name: "web", UID: "u1"}}}
	testenv.Must(t, operator.Create(ctx, ip))
	patchIPStatus(t, agentA, ip.Name, func(s *paasv1.IPStatus) { s.AnnouncedBy = []string{"node-a"} }, "")
	patchIPStatus(t, agentA, ip.Name, func(s *paasv1.IPStatus) { s.AnnouncedBy = []string{"node-a", "node-b"} },
		"may record only its own node as announcing 192.0.2.10, not node-b")
	patchIPStatus(t, agentA, ip.Name, func(s *paasv1.IPStatus) { s.AnnouncedBy = []string{"node-b"} }, "not node-b")
	patchIPStatus(t, agentA, ip.Name, func(s *paasv1.IPStatus) {
		s.Owner = &paasv1.IPOwner{Namespace: "default", Name: "attacker", UID: "u2"}
	}, "written by the operator only")
	// The next L2 owner takes over: it replaces the old owner by itself, and
	// records the move in the history, in the same write.
	moved := paasv1.Failover{At: metav1.Now().Rfc3339Copy(), From: "node-a", To: "node-b", Cause: paasv1.FailoverOwnerDead, GapMilliseconds: ptr.To[int64](12)}
	patchIPStatus(t, agentB, ip.Name, func(s *paasv1.IPStatus) {
		s.AnnouncedBy = []string{"node-b"}
		s.History = append(s.History, moved)
	}, "")
	// Forging history: an entry for another node, or changing another
	// node's entry.
	forged := moved
	forged.From, forged.Cause = "node-b", paasv1.FailoverPlannedMove
	patchIPStatus(t, agentA, ip.Name, func(s *paasv1.IPStatus) { s.History = append(s.History, forged) },
		"may add to the history of 192.0.2.10 only moves to its own node, not to node-b")
	patchIPStatus(t, agentA, ip.Name, func(s *paasv1.IPStatus) { s.History[0].GapMilliseconds = ptr.To[int64](9000) },
		"only moves to its own node, not to node-b")
	patchIPStatus(t, agentA, ip.Name, func(s *paasv1.IPStatus) { s.History[0].To = "node-c" },
		"only moves to its own node, not to node-c")
	// The CRD bounds the list, whoever writes it.
	patchIPStatus(t, agentB, ip.Name, func(s *paasv1.IPStatus) {
		for range 32 {
			s.History = append(s.History, moved)
		}
	}, "must have at most 32 items")
	// A node that does not announce the address raises no condition on it.
	patchIPStatus(t, agentA, ip.Name, func(s *paasv1.IPStatus) {
		s.Conditions = []metav1.Condition{{Type: paasv1.IPConditionConflict, Status: metav1.ConditionTrue, Reason: paasv1.ReasonForeignMAC,
			Message: "forged", LastTransitionTime: metav1.Now()}}
	}, "reports conditions only on addresses its node announces")
	patchIPStatus(t, agentB, ip.Name, func(s *paasv1.IPStatus) {
		s.Conditions = []metav1.Condition{{Type: paasv1.IPConditionConflict, Status: metav1.ConditionTrue, Reason: paasv1.ReasonForeignMAC,
			Message: "heard", LastTransitionTime: metav1.Now()}}
	}, "")
}

// testInUseOnLAN: an agent writes the IP condition InUseOnLAN only as the
// verdict of the probe before an address's first announcement, and a person
// may delete the record of an address in use, and no other ledger object.
func testInUseOnLAN(t *testing.T, admin, operator, agentA, agentB client.Client) {
	ctx := context.Background()
	verdict := func(status metav1.ConditionStatus) func(*paasv1.IPStatus) {
		return func(s *paasv1.IPStatus) {
			reason := paasv1.ReasonProbeAnswered
			if status == metav1.ConditionFalse {
				reason = paasv1.ReasonProbeSilent
			}
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: paasv1.IPConditionInUseOnLAN, Status: status, Reason: reason, Message: "02:00:00:00:00:cc answered"})
		}
	}
	for _, name := range []string{"192.0.2.20", "192.0.2.21", "192.0.2.22"} {
		testenv.Must(t, operator.Create(ctx, &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: paasv1.IPSpec{Address: name, Owner: &paasv1.IPOwner{Namespace: "default", Name: "web-" + name, UID: types.UID("u-" + name)}}}))
	}
	for _, tc := range []struct {
		desc    string
		agent   client.Client
		ip      string
		mutate  func(*paasv1.IPStatus)
		refusal string
	}{
		{"in use on an address a node announces (192.0.2.10, node-b's), by another node", agentA, "192.0.2.10", verdict(metav1.ConditionTrue), "writes InUseOnLAN on 192.0.2.10 only as the verdict"},
		{"in use on an address its own node announces", agentB, "192.0.2.10", verdict(metav1.ConditionTrue), "writes InUseOnLAN on 192.0.2.10 only as the verdict"},
		{"silent on an address never announced, without announcing it", agentA, "192.0.2.20", verdict(metav1.ConditionFalse), "only as the verdict"},
		{"in use on an address never announced, while naming itself", agentA, "192.0.2.20", func(s *paasv1.IPStatus) {
			verdict(metav1.ConditionTrue)(s)
			s.AnnouncedBy = []string{"node-a"}
		}, "only as the verdict"},
		{"in use on an address never announced: the probe's verdict", agentA, "192.0.2.20", verdict(metav1.ConditionTrue), ""},
		{"another condition on it with the verdict", agentA, "192.0.2.20", func(s *paasv1.IPStatus) {
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: paasv1.IPConditionConflict, Status: metav1.ConditionTrue, Reason: paasv1.ReasonForeignMAC, Message: "forged"})
		}, "reports conditions only on addresses its node announces"},
		{"a recheck by another node clears it", agentB, "192.0.2.20", verdict(metav1.ConditionFalse), ""},
		{"in use again once found silent", agentA, "192.0.2.20", verdict(metav1.ConditionTrue), "only as the verdict"},
		{"silent, as its node announces it for the first time", agentA, "192.0.2.21", func(s *paasv1.IPStatus) {
			verdict(metav1.ConditionFalse)(s)
			s.AnnouncedBy = []string{"node-a"}
		}, ""},
		{"in use once announced", agentB, "192.0.2.21", verdict(metav1.ConditionTrue), "only as the verdict"},
	} {
		t.Run(tc.desc, func(t *testing.T) { patchIPStatus(t, tc.agent, tc.ip, tc.mutate, tc.refusal) })
	}

	t.Run("a person deletes the record of an address in use, and no other ledger object", func(t *testing.T) {
		patchIPStatus(t, agentA, "192.0.2.22", verdict(metav1.ConditionTrue), "")
		checkRefusal(t, admin.Delete(ctx, &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.22"}}), "only the operator writes them")
		ip := &paasv1.IP{}
		testenv.Must(t, operator.Get(ctx, types.NamespacedName{Name: "192.0.2.22"}, ip))
		ip.Spec.Owner = nil // its Service left: the operator keeps it as a record
		testenv.Must(t, operator.Update(ctx, ip))
		checkRefusal(t, admin.Delete(ctx, &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.10"}}), "only the operator writes them")
		checkRefusal(t, admin.Delete(ctx, &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.22"}}), "")
	})
}

// testAgentBGPPeerStatus: each agent writes only its own session entry of a BGPPeer.
func testAgentBGPPeerStatus(t *testing.T, admin client.Client, agent map[string]client.Client) {
	ctx := context.Background()
	agentA := agent["node-a"]
	testenv.Must(t, admin.Create(ctx, &paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor"},
		Spec: paasv1.BGPPeerSpec{PeerAddress: "192.0.2.254", PeerASN: 64512, MyASN: 64513}}))
	established := &paasv1.BGPSession{State: paasv1.SessionEstablished, Since: ptr.To(metav1.Now())}
	for node, cl := range agent {
		s := established.DeepCopy()
		s.Node = node
		// The agent's own code: server-side apply with a field manager per node.
		testenv.Must(t, (&announce.BGPAnnouncer{Client: cl, NodeName: node}).ApplySession(ctx, "tor", s))
	}
	forged := &paasv1.BGPSession{Node: "node-b", State: "Idle", Message: "forged"}
	for _, tc := range []struct {
		desc    string
		mutate  func(*paasv1.BGPPeerStatus)
		refusal string
	}{
		{"change another node's entry", func(s *paasv1.BGPPeerStatus) {
			for i := range s.Sessions {
				if s.Sessions[i].Node == "node-b" {
					s.Sessions[i].State = "Idle"
				}
			}
		}, "may write only its own session entry of BGPPeer tor"},
		{"drop another node's entry", func(s *paasv1.BGPPeerStatus) {
			s.Sessions = []paasv1.BGPSession{*established}
			s.Sessions[0].Node = "node-a"
		}, "may write only its own session entry"},
		{"the conditions", func(s *paasv1.BGPPeerStatus) {
			s.Conditions = []metav1.Condition{{Type: paasv1.BGPPeerEstablished, Status: metav1.ConditionTrue, Reason: "Forged", LastTransitionTime: metav1.Now()}}
		}, "written by the operator only"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			peer := &paasv1.BGPPeer{}
			testenv.Must(t, agentA.Get(ctx, types.NamespacedName{Name: "tor"}, peer))
			patch := client.MergeFrom(peer.DeepCopy())
			tc.mutate(&peer.Status)
			err := agentA.Status().Patch(ctx, peer, patch)
			if err == nil || !strings.Contains(err.Error(), tc.refusal) {
				t.Fatalf("got %v, want a refusal with %q", err, tc.refusal)
			}
		})
	}
	t.Run("forge another node's entry with its field manager", func(t *testing.T) {
		err := (&announce.BGPAnnouncer{Client: agentA, NodeName: "node-b"}).ApplySession(ctx, "tor", forged)
		if err == nil || !strings.Contains(err.Error(), "may write only its own session entry") {
			t.Fatalf("got %v, want a refusal", err)
		}
	})
	peer := &paasv1.BGPPeer{}
	testenv.Must(t, admin.Get(ctx, types.NamespacedName{Name: "tor"}, peer))
	for _, s := range peer.Status.Sessions {
		if s.State != paasv1.SessionEstablished {
			t.Errorf("session of %s changed: %+v", s.Node, s)
		}
	}
	if len(peer.Status.Sessions) != 2 {
		t.Errorf("sessions %+v, want node-a's and node-b's", peer.Status.Sessions)
	}
}

// testOperatorNamespace: the operator stays in its namespace for DaemonSets and
// Secrets, and creates no Secret but the agents' two.
func testOperatorNamespace(t *testing.T, operator client.Client) {
	ctx := context.Background()
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "miner"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/miner"}}}}}}
	refused(t, "create a DaemonSet in default", operator.Create(ctx, ds), "forbidden")
	refused(t, "read a Secret in default", operator.Get(ctx, types.NamespacedName{Namespace: "default", Name: "x"}, &corev1.Secret{}), "forbidden")
	refused(t, "list DaemonSets everywhere", operator.List(ctx, &appsv1.DaemonSetList{}), "forbidden")
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "agent-forever",
		Annotations: map[string]string{corev1.ServiceAccountNameKey: agentctrl.ServiceAccount}},
		Type: corev1.SecretTypeServiceAccountToken}
	refused(t, "mint a token Secret for the agent", operator.Create(ctx, token), "writes only its Opaque Secrets")
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "other"}, Type: corev1.SecretTypeOpaque}
	refused(t, "create another Secret", operator.Create(ctx, other), "writes only its Opaque Secrets")
	disguised := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: paasv1.BGPPasswordsSecret,
		Annotations: map[string]string{corev1.ServiceAccountNameKey: agentctrl.ServiceAccount}},
		Type: corev1.SecretTypeServiceAccountToken}
	refused(t, "a token Secret under an allowed name", operator.Create(ctx, disguised), "writes only its Opaque Secrets")
	allowed := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: paasv1.BGPPasswordsSecret}, Type: corev1.SecretTypeOpaque}
	testenv.Must(t, operator.Create(ctx, allowed))
}

func refused(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: got %v, want a refusal with %q", what, err, want)
	}
}

func setAnnotation(n *corev1.Node, k, v string) {
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[k] = v
}

// patchNode patches Node name as c, with mutate applied; refusal "" means it
// must succeed, else it must be refused with that text.
func patchNode(t *testing.T, c client.Client, name string, mutate func(*corev1.Node), refusal string) {
	t.Helper()
	n := &corev1.Node{}
	testenv.Must(t, c.Get(context.Background(), types.NamespacedName{Name: name}, n))
	patch := client.MergeFrom(n.DeepCopy())
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	mutate(n)
	checkRefusal(t, c.Patch(context.Background(), n, patch), refusal)
}

// patchIPStatus patches IP name's status as c, as patchNode does.
func patchIPStatus(t *testing.T, c client.Client, name string, mutate func(*paasv1.IPStatus), refusal string) {
	t.Helper()
	ip := &paasv1.IP{}
	testenv.Must(t, c.Get(context.Background(), types.NamespacedName{Name: name}, ip))
	patch := client.MergeFrom(ip.DeepCopy())
	mutate(&ip.Status)
	checkRefusal(t, c.Status().Patch(context.Background(), ip, patch), refusal)
}

func checkRefusal(t *testing.T, err error, refusal string) {
	t.Helper()
	switch {
	case refusal == "" && err != nil:
		t.Errorf("want it allowed, got %v", err)
	case refusal != "" && (err == nil || !strings.Contains(err.Error(), refusal)):
		t.Errorf("want a refusal with %q, got %v", refusal, fmt.Sprint(err))
	}
}
