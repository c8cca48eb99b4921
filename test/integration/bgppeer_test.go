//go:build envtest

package integration

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent/announce"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

func newBGPPeer(name string, mutate func(*paasv1.BGPPeerSpec)) *paasv1.BGPPeer {
	p := &paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: paasv1.BGPPeerSpec{
		PeerAddress: "192.0.2.254", PeerASN: 64512, MyASN: 64513,
		HoldTime: &metav1.Duration{Duration: 3 * time.Second}, KeepaliveTime: &metav1.Duration{Duration: time.Second},
	}}
	if mutate != nil {
		mutate(&p.Spec)
	}
	return p
}

// bgpNode creates a Node running an agent (it published its interfaces) with
// the label bgp-test=<set>, and deletes it at the end.
func bgpNode(name, set string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bgp-test": set},
		Annotations: map[string]string{paasv1.NodeInterfacesAnnotation: `[{"name":"eth0","mac":"02:00:00:00:00:01","addrs":["198.51.100.11/24"]}]`}}}
	Expect(k8s.Create(context.Background(), n)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(context.Background(), n))).To(Succeed()) })
	return n
}

// peerCondition waits until the peer's condition of type has status and
// reason, and a message with every one of texts, and returns it.
func peerCondition(name, typ string, status metav1.ConditionStatus, reason string, texts ...string) metav1.Condition {
	var c metav1.Condition
	EventuallyWithOffset(1, func(g Gomega) {
		var p paasv1.BGPPeer
		g.Expect(k8s.Get(context.Background(), types.NamespacedName{Name: name}, &p)).To(Succeed())
		found := findCondition(p.Status.Conditions, typ)
		g.Expect(found).NotTo(BeNil())
		g.Expect(found.Status).To(Equal(status), found.Message)
		g.Expect(found.Reason).To(Equal(reason), found.Message)
		for _, t := range texts {
			g.Expect(found.Message).To(ContainSubstring(t))
		}
		c = *found
	}).Should(Succeed())
	return c
}

// agentSessions writes session entries as the agent of a node does, with the
// agents' ServiceAccount (so their RBAC is what is tested).
func agentSessions(node string) *announce.BGPAnnouncer {
	c, err := client.New(env.AgentConfig(node), client.Options{Scheme: paasv1.NewScheme()})
	Expect(err).NotTo(HaveOccurred())
	return &announce.BGPAnnouncer{Client: c, NodeName: node}
}

var _ = Describe("BGPPeer", func() {
	DescribeTable("the API server rejects bad peers with a message",
		func(mutate func(*paasv1.BGPPeerSpec), message string) {
			err := k8s.Create(context.Background(), newBGPPeer("bad", mutate))
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("address not an IP", func(s *paasv1.BGPPeerSpec) { s.PeerAddress = "router.example" }, "peerAddress must be an IP address"),
		Entry("neither address nor interface", func(s *paasv1.BGPPeerSpec) { s.PeerAddress = "" }, "set exactly one of peerAddress"),
		Entry("both address and interface", func(s *paasv1.BGPPeerSpec) { s.Interface = "eth0" }, "set exactly one of peerAddress"),
		Entry("an interface name with a slash", func(s *paasv1.BGPPeerSpec) { s.PeerAddress, s.Interface = "", "../eth0" }, "spec.interface"),
		Entry("an interface name over 15 bytes", func(s *paasv1.BGPPeerSpec) { s.PeerAddress, s.Interface = "", "eth0123456789abcd" }, "spec.interface"),
		Entry("unnumbered with BFD", func(s *paasv1.BGPPeerSpec) { s.PeerAddress, s.Interface, s.BFD = "", "eth0", &paasv1.BFDSettings{} },
			"an unnumbered session (interface) is single hop and runs without bfd"),
		Entry("unnumbered multi-hop", func(s *paasv1.BGPPeerSpec) { s.PeerAddress, s.Interface, s.EBGPMultiHop = "", "eth0", ptr.To(true) },
			"an unnumbered session (interface) is single hop"),
		Entry("ASN 0", func(s *paasv1.BGPPeerSpec) { s.PeerASN = 0 }, "spec.peerASN"),
		Entry("ASN over 32 bits", func(s *paasv1.BGPPeerSpec) { s.MyASN = 1 << 32 }, "spec.myASN"),
		Entry("port over 65535", func(s *paasv1.BGPPeerSpec) { s.PeerPort = 70000 }, "spec.peerPort"),
		Entry("hold time under 3s", func(s *paasv1.BGPPeerSpec) { s.HoldTime.Duration = 2 * time.Second }, "holdTime must be 0s (no keepalives) or at least 3s"),
		Entry("keepalive over a third of hold", func(s *paasv1.BGPPeerSpec) {
			s.HoldTime.Duration, s.KeepaliveTime.Duration = 9*time.Second, 4*time.Second
		}, "keepaliveTime must be at most a third of holdTime"),
		Entry("multi-hop on iBGP", func(s *paasv1.BGPPeerSpec) { s.MyASN, s.EBGPMultiHop = s.PeerASN, ptr.To(true) }, "ebgpMultiHop applies to eBGP only"),
		Entry("router ID not IPv4", func(s *paasv1.BGPPeerSpec) { s.RouterID = "2001:db8::1" }, "routerID must be an IPv4 address"),
		Entry("BFD on a multi-hop session", func(s *paasv1.BGPPeerSpec) { s.EBGPMultiHop, s.BFD = ptr.To(true), &paasv1.BFDSettings{} },
			"bfd runs on single-hop sessions only"),
		Entry("BFD receive interval under 10 ms", func(s *paasv1.BGPPeerSpec) { s.BFD = &paasv1.BFDSettings{ReceiveInterval: ptr.To[int32](5)} },
			"spec.bfd.receiveInterval"),
		Entry("BFD transmit interval over 60 s", func(s *paasv1.BGPPeerSpec) { s.BFD = &paasv1.BFDSettings{TransmitInterval: ptr.To[int32](60001)} },
			"spec.bfd.transmitInterval"),
		Entry("BFD multiplier 1", func(s *paasv1.BGPPeerSpec) { s.BFD = &paasv1.BFDSettings{DetectMultiplier: ptr.To[int32](1)} },
			"spec.bfd.detectMultiplier"),
		Entry("BFD multiplier over 255", func(s *paasv1.BGPPeerSpec) { s.BFD = &paasv1.BFDSettings{DetectMultiplier: ptr.To[int32](256)} },
			"spec.bfd.detectMultiplier"),
	)

	It("accepts an unnumbered peer: an interface, no address", func() {
		p := newBGPPeer("unnumbered", func(s *paasv1.BGPPeerSpec) { s.PeerAddress, s.Interface = "", "swp1" })
		Expect(k8s.Create(context.Background(), p)).To(Succeed())
		Expect(k8s.Delete(context.Background(), p)).To(Succeed())
	})

	DescribeTable("the API server rejects bad communities on a BGP group",
		func(community string) {
			g := newIPGroup("bgp-bad-community", "203.0.113.0/28")
			g.Spec.Announce = &paasv1.Announce{Mode: paasv1.AnnounceBGP, BGP: &paasv1.BGPAnnounce{Communities: []string{community}}}
			err := k8s.Create(context.Background(), g)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring("spec.announce.bgp.communities"))
		},
		Entry("standard value over 16 bits", "65000:70000"),
		Entry("standard ASN over 16 bits", "70000:1"),
		Entry("large part over 32 bits", "65000:1:4294967296"),
		Entry("not a community", "no-export"),
	)

	DescribeTable("aggregationLength: bounded, and never wider than the segment",
		func(segment string, v4, v6 *int32, message string) {
			g := newIPGroup("bgp-aggregate", segment)
			g.Spec.Announce = &paasv1.Announce{Mode: paasv1.AnnounceBGP, BGP: &paasv1.BGPAnnounce{AggregationLength: v4, AggregationLengthV6: v6}}
			err := k8s.Create(context.Background(), g)
			if message == "" {
				Expect(err).NotTo(HaveOccurred())
				Expect(k8s.Delete(context.Background(), g)).To(Succeed())
				return
			}
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("a /28 of a /25", "203.0.113.128/25", ptr.To[int32](28), nil, ""),
		Entry("the segment's own length", "203.0.113.128/25", ptr.To[int32](25), nil, ""),
		Entry("an IPv6 /120 of a /64", "2001:db8:100::/64", nil, ptr.To[int32](120), ""),
		Entry("wider than the segment", "203.0.113.128/25", ptr.To[int32](24), nil, "must not be shorter than the segment's prefix"),
		Entry("IPv6 wider than the segment", "2001:db8:100::/64", nil, ptr.To[int32](48), "must not be shorter than the segment's prefix"),
		Entry("over 32", "203.0.113.128/25", ptr.To[int32](33), nil, "spec.announce.bgp.aggregationLength"),
		Entry("under 8", "203.0.113.128/25", ptr.To[int32](4), nil, "spec.announce.bgp.aggregationLength"),
		Entry("IPv6 over 128", "2001:db8:100::/64", nil, ptr.To[int32](129), "spec.announce.bgp.aggregationLengthV6"),
	)

	DescribeTable("aggregationLength: never wider than any part of the pool of its family",
		func(addresses []string, v4, v6 *int32, message string) {
			g := newIPGroup("bgp-aggregate-parts", "")
			g.Spec.Segment, g.Spec.Addresses = "", addresses
			g.Spec.Announce = &paasv1.Announce{Mode: paasv1.AnnounceBGP, BGP: &paasv1.BGPAnnounce{AggregationLength: v4, AggregationLengthV6: v6}}
			err := k8s.Create(context.Background(), g)
			if message == "" {
				Expect(err).NotTo(HaveOccurred())
				Expect(k8s.Delete(context.Background(), g)).To(Succeed())
				return
			}
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("addresses only, a /8 over a /28", []string{"203.0.113.0/28"}, ptr.To[int32](8), nil, "must not be shorter than the prefix of any addresses entry of its family"),
		Entry("addresses only, the entry's length", []string{"203.0.113.0/28"}, ptr.To[int32](28), nil, ""),
		Entry("IPv6 beside IPv4: the IPv6 entry bounds aggregationLengthV6", []string{"203.0.113.0/28", "2001:db8:100::/120"}, ptr.To[int32](28), ptr.To[int32](16), "must not be shorter than the prefix of any addresses entry of its family"),
		Entry("the longest entry of the family bounds it", []string{"203.0.113.0/24", "198.51.100.0/28"}, ptr.To[int32](24), nil, "must not be shorter than the prefix of any addresses entry of its family"),
		Entry("a range: bounded where the route is built", []string{"203.0.113.10-203.0.113.20"}, ptr.To[int32](24), nil, ""),
	)

	It("fills the defaults, and reports who peers and whose session is up", func() {
		ctx := context.Background()
		bgpNode("bgp-n1", "a")
		bgpNode("bgp-n2", "a")
		peer := newBGPPeer("tor-a", func(s *paasv1.BGPPeerSpec) {
			s.PeerAddress, s.HoldTime, s.KeepaliveTime = "2001:db8::fe", nil, nil
			s.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"bgp-test": "a"}}
		})
		Expect(k8s.Create(ctx, peer)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, peer)).To(Succeed()) })

		var p paasv1.BGPPeer
		Expect(k8s.Get(ctx, types.NamespacedName{Name: "tor-a"}, &p)).To(Succeed())
		Expect(p.Spec.PeerPort).To(Equal(int32(179)))
		Expect(p.Spec.HoldTime).To(Equal(&metav1.Duration{Duration: 3 * time.Second}))
		Expect(p.Spec.KeepaliveTime).To(Equal(&metav1.Duration{Duration: time.Second}))

		c := peerCondition("tor-a", paasv1.BGPPeerAccepted, metav1.ConditionTrue, paasv1.ReasonPeerAccepted)
		Expect(c.Message).To(ContainSubstring("2 node(s)"))
		peerCondition("tor-a", paasv1.BGPPeerEstablished, metav1.ConditionFalse, paasv1.ReasonNoSessionYet)

		// Each agent writes its own entry; neither overwrites the other.
		since := metav1.NewTime(time.Now().Truncate(time.Second))
		Expect(agentSessions("bgp-n1").ApplySession(ctx, "tor-a", &paasv1.BGPSession{Node: "bgp-n1", State: "Established", Since: &since, PrefixesSent: 3})).To(Succeed())
		Expect(agentSessions("bgp-n2").ApplySession(ctx, "tor-a", &paasv1.BGPSession{Node: "bgp-n2", State: "Active", Since: &since,
			Message: "cannot connect: connection refused"})).To(Succeed())
		peerCondition("tor-a", paasv1.BGPPeerEstablished, metav1.ConditionFalse, paasv1.ReasonSessionsDown,
			"1 of 2 sessions established", "bgp-n2: Active (cannot connect: connection refused)")

		Expect(agentSessions("bgp-n2").ApplySession(ctx, "tor-a", &paasv1.BGPSession{Node: "bgp-n2", State: "Established", Since: &since, PrefixesSent: 3})).To(Succeed())
		peerCondition("tor-a", paasv1.BGPPeerEstablished, metav1.ConditionTrue, paasv1.ReasonAllEstablished, "2 of 2")
		Expect(k8s.Get(ctx, types.NamespacedName{Name: "tor-a"}, &p)).To(Succeed())
		Expect(p.Status.Sessions).To(HaveLen(2))

		// A node that goes away takes its session entry with it.
		Expect(k8s.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bgp-n2"}})).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, types.NamespacedName{Name: "tor-a"}, &p)).To(Succeed())
			g.Expect(p.Status.Sessions).To(HaveLen(1))
			g.Expect(p.Status.Sessions[0].Node).To(Equal("bgp-n1"))
		}).Should(Succeed())
		peerCondition("tor-a", paasv1.BGPPeerEstablished, metav1.ConditionTrue, paasv1.ReasonAllEstablished, "1 of 1")

		// An agent that stops peering removes its entry.
		Expect(agentSessions("bgp-n1").ApplySession(ctx, "tor-a", nil)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, types.NamespacedName{Name: "tor-a"}, &p)).To(Succeed())
			g.Expect(p.Status.Sessions).To(BeEmpty())
		}).Should(Succeed())
	})

	It("fills BFD's defaults, and says which established sessions run without BFD", func() {
		ctx := context.Background()
		bgpNode("bfd-n1", "bfd")
		bgpNode("bfd-n2", "bfd")
		peer := newBGPPeer("tor-bfd", func(s *paasv1.BGPPeerSpec) {
			s.BFD = &paasv1.BFDSettings{}
			s.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"bgp-test": "bfd"}}
		})
		Expect(k8s.Create(ctx, peer)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, peer)).To(Succeed()) })
		var p paasv1.BGPPeer
		Expect(k8s.Get(ctx, types.NamespacedName{Name: "tor-bfd"}, &p)).To(Succeed())
		Expect(p.Spec.BFD).To(Equal(&paasv1.BFDSettings{ReceiveInterval: ptr.To[int32](300), TransmitInterval: ptr.To[int32](300), DetectMultiplier: ptr.To[int32](3)}))
		peerCondition("tor-bfd", paasv1.BGPPeerBFDUp, metav1.ConditionUnknown, paasv1.ReasonNoEstablishedSession)

		since := metav1.NewTime(time.Now().Truncate(time.Second))
		Expect(agentSessions("bfd-n1").ApplySession(ctx, "tor-bfd", &paasv1.BGPSession{Node: "bfd-n1", State: "Established", Since: &since, BFD: paasv1.BFDUp})).To(Succeed())
		Expect(agentSessions("bfd-n2").ApplySession(ctx, "tor-bfd", &paasv1.BGPSession{Node: "bfd-n2", State: "Established", Since: &since, BFD: paasv1.BFDDown,
			BFDMessage: "the router sends no BFD packets"})).To(Succeed())
		peerCondition("tor-bfd", paasv1.BGPPeerBFDUp, metav1.ConditionFalse, paasv1.ReasonBFDDown, "1 of 2", "bfd-n2: Down (the router sends no BFD packets)")
		Expect(agentSessions("bfd-n2").ApplySession(ctx, "tor-bfd", &paasv1.BGPSession{Node: "bfd-n2", State: "Established", Since: &since, BFD: paasv1.BFDUp})).To(Succeed())
		peerCondition("tor-bfd", paasv1.BGPPeerBFDUp, metav1.ConditionTrue, paasv1.ReasonBFDUp, "2 of 2")

		// An agent reports only the states of RFC 5880 (and NotConfigured).
		err := agentSessions("bfd-n1").ApplySession(ctx, "tor-bfd", &paasv1.BGPSession{Node: "bfd-n1", State: "Established", Since: &since, BFD: "Sideways"})
		Expect(err).To(HaveOccurred())

		// bfd removed: the condition goes.
		Expect(k8s.Get(ctx, types.NamespacedName{Name: "tor-bfd"}, &p)).To(Succeed())
		patch := client.MergeFrom(p.DeepCopy())
		p.Spec.BFD = nil
		Expect(k8s.Patch(ctx, &p, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, types.NamespacedName{Name: "tor-bfd"}, &p)).To(Succeed())
			g.Expect(findCondition(p.Status.Conditions, paasv1.BGPPeerBFDUp)).To(BeNil())
		}).Should(Succeed())
	})

	It("says when no node peers", func() {
		peer := newBGPPeer("tor-nobody", func(s *paasv1.BGPPeerSpec) {
			s.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"bgp-test": "nobody"}}
		})
		Expect(k8s.Create(context.Background(), peer)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(context.Background(), peer)).To(Succeed()) })
		c := peerCondition("tor-nobody", paasv1.BGPPeerAccepted, metav1.ConditionFalse, paasv1.ReasonNoNodes)
		Expect(c.Message).To(ContainSubstring("nodeSelector"))
	})

	It("hands the password to the agents, and says when its Secret is missing", func() {
		ctx := context.Background()
		bgpNode("bgp-n3", "md5")
		peer := newBGPPeer("tor-md5", func(s *paasv1.BGPPeerSpec) {
			s.PasswordSecret = &paasv1.SecretKeyRef{Name: "tor-md5-auth", Key: "password"}
			s.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"bgp-test": "md5"}}
		})
		Expect(k8s.Create(ctx, peer)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, peer)).To(Succeed()) })
		c := peerCondition("tor-md5", paasv1.BGPPeerAccepted, metav1.ConditionFalse, paasv1.ReasonPasswordSecretNotFound)
		Expect(c.Message).To(And(ContainSubstring("vip-allocator-operator/tor-md5-auth"), ContainSubstring(`key "password"`)))

		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.OperatorNamespace, Name: "tor-md5-auth",
			Labels: map[string]string{paasv1.BGPPasswordLabel: "true"}},
			StringData: map[string]string{"password": "s3cret"}}
		Expect(k8s.Create(ctx, secret)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, secret)).To(Succeed()) })
		peerCondition("tor-md5", paasv1.BGPPeerAccepted, metav1.ConditionTrue, paasv1.ReasonPeerAccepted)

		// The agents read the copy (and may read no other Secret).
		agent := agentSessions("bgp-n3").Client
		var copied corev1.Secret
		Expect(agent.Get(ctx, types.NamespacedName{Namespace: testenv.OperatorNamespace, Name: paasv1.BGPPasswordsSecret}, &copied)).To(Succeed())
		Expect(string(copied.Data["tor-md5"])).To(Equal("s3cret"))
		Expect(agent.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{})).NotTo(Succeed())

		// A rotated password reaches the copy at once.
		secret.StringData = map[string]string{"password": "rotated"}
		Expect(k8s.Update(ctx, secret)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(agent.Get(ctx, types.NamespacedName{Namespace: testenv.OperatorNamespace, Name: paasv1.BGPPasswordsSecret}, &copied)).To(Succeed())
			g.Expect(string(copied.Data["tor-md5"])).To(Equal("rotated"))
		}).Should(Succeed())
	})

	It("keeps the password last copied when its Secret goes, across a restart, and drops it only when passwordSecret is removed", func() {
		ctx := context.Background()
		bgpNode("bgp-n5", "md5-kept")
		peer := newBGPPeer("tor-kept", func(s *paasv1.BGPPeerSpec) {
			s.PasswordSecret = &paasv1.SecretKeyRef{Name: "tor-kept-auth", Key: "password"}
			s.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"bgp-test": "md5-kept"}}
		})
		Expect(k8s.Create(ctx, peer)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, peer))).To(Succeed()) })
		newSecret := func(pw string) *corev1.Secret {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.OperatorNamespace, Name: "tor-kept-auth",
				Labels: map[string]string{paasv1.BGPPasswordLabel: "true"}}, StringData: map[string]string{"password": pw}}
		}
		secret := newSecret("s3cret")
		Expect(k8s.Create(ctx, secret)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, newSecret("")))).To(Succeed()) })
		agent := agentSessions("bgp-n5").Client
		copiedPassword := func(g Gomega) string {
			var copied corev1.Secret
			g.Expect(agent.Get(ctx, types.NamespacedName{Namespace: testenv.OperatorNamespace, Name: paasv1.BGPPasswordsSecret}, &copied)).To(Succeed())
			pw, ok := copied.Data["tor-kept"]
			if !ok {
				return "<none>"
			}
			return string(pw)
		}
		Eventually(copiedPassword).Should(Equal("s3cret"))
		peerCondition("tor-kept", paasv1.BGPPeerAccepted, metav1.ConditionTrue, paasv1.ReasonPeerAccepted)

		By("deleting the Secret: the agents keep the password, the peer and an Event say so")
		Expect(k8s.Delete(ctx, secret)).To(Succeed())
		c := peerCondition("tor-kept", paasv1.BGPPeerAccepted, metav1.ConditionTrue, paasv1.ReasonPasswordSecretMissingKeptLastGood,
			"vip-allocator-operator/tor-kept-auth", "does not exist", "remove spec.passwordSecret")
		eventuallyEvent(peer, corev1.EventTypeWarning, paasv1.EventPasswordKeptLastGood, c.Message)
		Consistently(copiedPassword).WithTimeout(2 * time.Second).Should(Equal("s3cret"))

		By("restarting the operator: it reads the kept password back")
		stopOperator()
		runOperator()
		peerCondition("tor-kept", paasv1.BGPPeerAccepted, metav1.ConditionTrue, paasv1.ReasonPasswordSecretMissingKeptLastGood)
		Consistently(copiedPassword).WithTimeout(2 * time.Second).Should(Equal("s3cret"))

		By("re-creating it without its label: still kept")
		unlabelled := newSecret("other")
		unlabelled.Labels = nil
		Expect(k8s.Create(ctx, unlabelled)).To(Succeed())
		peerCondition("tor-kept", paasv1.BGPPeerAccepted, metav1.ConditionTrue, paasv1.ReasonPasswordSecretNotLabelledKeptLastGood, paasv1.BGPPasswordLabel)
		Consistently(copiedPassword).WithTimeout(2 * time.Second).Should(Equal("s3cret"))

		By("labelling it: a valid Secret, its new value is used")
		unlabelled.Labels = map[string]string{paasv1.BGPPasswordLabel: "true"}
		Expect(k8s.Update(ctx, unlabelled)).To(Succeed())
		Eventually(copiedPassword).Should(Equal("other"))
		peerCondition("tor-kept", paasv1.BGPPeerAccepted, metav1.ConditionTrue, paasv1.ReasonPeerAccepted)

		By("deleting it again, then removing spec.passwordSecret: the password is dropped")
		Expect(k8s.Delete(ctx, unlabelled)).To(Succeed())
		peerCondition("tor-kept", paasv1.BGPPeerAccepted, metav1.ConditionTrue, paasv1.ReasonPasswordSecretMissingKeptLastGood)
		Expect(copiedPassword(Default)).To(Equal("other"))
		var p paasv1.BGPPeer
		Expect(k8s.Get(ctx, types.NamespacedName{Name: "tor-kept"}, &p)).To(Succeed())
		patch := client.MergeFrom(p.DeepCopy())
		p.Spec.PasswordSecret = nil
		Expect(k8s.Patch(ctx, &p, patch)).To(Succeed())
		Eventually(copiedPassword).Should(Equal("<none>"))
		peerCondition("tor-kept", paasv1.BGPPeerAccepted, metav1.ConditionTrue, paasv1.ReasonPeerAccepted)
	})

	It("copies nothing out of a Secret not labelled for BGP passwords, such as the gossip key", func() {
		ctx := context.Background()
		bgpNode("bgp-n4", "md5-unlabelled")
		// The gossip key, which the operator creates.
		Eventually(func() error {
			return k8s.Get(ctx, types.NamespacedName{Namespace: testenv.OperatorNamespace, Name: paasv1.MemberlistSecret}, &corev1.Secret{})
		}).Should(Succeed())
		other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.OperatorNamespace, Name: "not-for-bgp"},
			StringData: map[string]string{"key": "must-not-leak"}}
		Expect(k8s.Create(ctx, other)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, other)).To(Succeed()) })
		for _, ref := range []paasv1.SecretKeyRef{{Name: "not-for-bgp", Key: "key"}, {Name: paasv1.MemberlistSecret, Key: paasv1.MemberlistKey}} {
			name := "tor-" + ref.Name
			peer := newBGPPeer(name, func(s *paasv1.BGPPeerSpec) {
				s.PasswordSecret = &paasv1.SecretKeyRef{Name: ref.Name, Key: ref.Key}
				s.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"bgp-test": "md5-unlabelled"}}
			})
			Expect(k8s.Create(ctx, peer)).To(Succeed())
			DeferCleanup(func() { Expect(k8s.Delete(ctx, peer)).To(Succeed()) })
			c := peerCondition(name, paasv1.BGPPeerAccepted, metav1.ConditionFalse, paasv1.ReasonPasswordSecretNotLabelled)
			Expect(c.Message).To(ContainSubstring(paasv1.BGPPasswordLabel))
		}
		var copied corev1.Secret
		err := k8s.Get(ctx, types.NamespacedName{Namespace: testenv.OperatorNamespace, Name: paasv1.BGPPasswordsSecret}, &copied)
		Expect(client.IgnoreNotFound(err)).To(Succeed())
		Expect(copied.Data).NotTo(HaveKey("tor-not-for-bgp"))
		Expect(copied.Data).NotTo(HaveKey("tor-" + paasv1.MemberlistSecret))

		// Labelled, the same Secret is used.
		other.Labels = map[string]string{paasv1.BGPPasswordLabel: "true"}
		Expect(k8s.Update(ctx, other)).To(Succeed())
		peerCondition("tor-not-for-bgp", paasv1.BGPPeerAccepted, metav1.ConditionTrue, paasv1.ReasonPeerAccepted)
	})

	It("refuses a holdTime above 65535s and a keepaliveTime above 21845s", func() {
		for _, mutate := range []func(*paasv1.BGPPeerSpec){
			func(s *paasv1.BGPPeerSpec) { s.HoldTime = &metav1.Duration{Duration: 65536 * time.Second} },
			func(s *paasv1.BGPPeerSpec) { s.KeepaliveTime = &metav1.Duration{Duration: 21846 * time.Second} },
		} {
			err := k8s.Create(context.Background(), newBGPPeer("tor-too-long", mutate))
			Expect(err).To(MatchError(ContainSubstring("must be at most")))
		}
		ok := newBGPPeer("tor-longest", func(s *paasv1.BGPPeerSpec) {
			s.HoldTime = &metav1.Duration{Duration: 65535 * time.Second}
			s.KeepaliveTime = &metav1.Duration{Duration: 21845 * time.Second}
		})
		Expect(k8s.Create(context.Background(), ok)).To(Succeed())
		Expect(k8s.Delete(context.Background(), ok)).To(Succeed())
	})
})
