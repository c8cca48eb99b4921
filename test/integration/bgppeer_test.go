package integration

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
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

var _ = Describe("BGPPeer", func() {
	DescribeTable("the API server rejects bad peers with a message",
		func(mutate func(*paasv1.BGPPeerSpec), message string) {
			err := k8s.Create(context.Background(), newBGPPeer("bad", mutate))
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("address not an IP", func(s *paasv1.BGPPeerSpec) { s.PeerAddress = "router.example" }, "peerAddress must be an IP address"),
		Entry("ASN 0", func(s *paasv1.BGPPeerSpec) { s.PeerASN = 0 }, "spec.peerASN"),
		Entry("ASN over 32 bits", func(s *paasv1.BGPPeerSpec) { s.MyASN = 1 << 32 }, "spec.myASN"),
		Entry("port over 65535", func(s *paasv1.BGPPeerSpec) { s.PeerPort = 70000 }, "spec.peerPort"),
		Entry("hold time under 3s", func(s *paasv1.BGPPeerSpec) { s.HoldTime.Duration = 2 * time.Second }, "holdTime must be 0s (no keepalives) or at least 3s"),
		Entry("keepalive over a third of hold", func(s *paasv1.BGPPeerSpec) {
			s.HoldTime.Duration, s.KeepaliveTime.Duration = 9*time.Second, 4*time.Second
		}, "keepaliveTime must be at most a third of holdTime"),
		Entry("multi-hop on iBGP", func(s *paasv1.BGPPeerSpec) { s.MyASN, s.EBGPMultiHop = s.PeerASN, ptr.To(true) }, "ebgpMultiHop applies to eBGP only"),
		Entry("router ID not IPv4", func(s *paasv1.BGPPeerSpec) { s.RouterID = "2001:db8::1" }, "routerID must be an IPv4 address"),
	)

	It("accepts a valid peer, fills the defaults, and says this version does not use it", func() {
		ctx := context.Background()
		Expect(k8s.Create(ctx, newBGPPeer("tor-a", func(s *paasv1.BGPPeerSpec) {
			s.PeerAddress, s.HoldTime, s.KeepaliveTime = "2001:db8::fe", nil, nil
		}))).To(Succeed())
		Eventually(func(g Gomega) {
			var p paasv1.BGPPeer
			g.Expect(k8s.Get(ctx, types.NamespacedName{Name: "tor-a"}, &p)).To(Succeed())
			g.Expect(p.Spec.PeerPort).To(Equal(int32(179)))
			g.Expect(p.Spec.HoldTime).To(Equal(&metav1.Duration{Duration: 3 * time.Second}))
			g.Expect(p.Spec.KeepaliveTime).To(Equal(&metav1.Duration{Duration: time.Second}))
			c := findCondition(p.Status.Conditions, paasv1.BGPPeerAccepted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(paasv1.ReasonBGPNotEnabled))
			g.Expect(c.Message).To(ContainSubstring("announce.mode L2"))
		}).Should(Succeed())
	})
})
