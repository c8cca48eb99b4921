//go:build root && envtest

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestBGPFabricAggregation: a group with aggregationLength 28 behind the
// fabric's leaf. The router gets one /28 from each node, ECMP over the three,
// and no host route; the client reaches both VIPs under it. A Local Service
// naming the group gets no address, and its condition says why.
func TestBGPFabricAggregation(t *testing.T) {
	d := setupFabric(t)
	ctx := context.Background()
	peer := &paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "leaf"},
		Spec: paasv1.BGPPeerSpec{PeerAddress: "198.51.100.1", PeerASN: 64512, MyASN: 64513}}
	group := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "bgp-vips"}, Spec: paasv1.IPGroupSpec{
		Segment: "203.0.113.128/25", Announce: &paasv1.Announce{Mode: paasv1.AnnounceBGP,
			BGP: &paasv1.BGPAnnounce{AggregationLength: ptr.To[int32](28)}}}}
	for _, o := range []client.Object{peer, group} {
		if err := d.env.Admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"node1", "node2", "node3"} {
		d.startAgent(t, n)
	}
	web, api := d.vipOf(t, d.bgpService(t, "web", false)), d.vipOf(t, d.bgpService(t, "api", false))
	testenv.Eventually(t, settle, "the router has the /28 from every node, and no host route", func() error {
		prefixes, err := d.router.prefixes()
		if err != nil {
			return err
		}
		if !slices.Equal(prefixes, []string{"203.0.113.128/28"}) {
			return fmt.Errorf("routes %v, want 203.0.113.128/28 alone (VIPs %s, %s)", prefixes, web, api)
		}
		got, err := d.router.pathsBy("203.0.113.128/28")
		if err == nil && !maps.Equal(got, map[string]string{"198.51.100.11": "64513", "198.51.100.12": "64513", "198.51.100.13": "64513"}) {
			err = fmt.Errorf("installed paths %v: want one per node", got)
		}
		return err
	})
	for _, vip := range []string{web, api} {
		testenv.Eventually(t, settle, "curl "+vip+" through the router", func() error {
			body, err := d.curl("http://" + vip + "/")
			if err == nil && !strings.HasPrefix(body, "backend1 ") {
				err = fmt.Errorf("answer %q", body)
			}
			return err
		})
	}
	local := d.createService(t, "local", true, map[string]string{"192.0.2.11": "node1"}, paasv1.IPGroupAnnotation, "bgp-vips")
	testenv.Eventually(t, settle, "the Local Service is refused the group, saying why", func() error {
		var s corev1.Service
		if err := d.env.Admin.Get(ctx, client.ObjectKeyFromObject(local), &s); err != nil {
			return err
		}
		c := meta.FindStatusCondition(s.Status.Conditions, paasv1.ConditionIPAllocated)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != paasv1.ReasonGroupNotAllowed || !strings.Contains(c.Message, "aggregationLength") {
			return fmt.Errorf("condition %+v", c)
		}
		if len(s.Status.LoadBalancer.Ingress) != 0 {
			return fmt.Errorf("it got %v", s.Status.LoadBalancer.Ingress)
		}
		return nil
	})
}

// prefixes are the IPv4 prefixes in bgpd's table, sorted.
func (r *frr) prefixes() ([]string, error) {
	out, err := r.vtysh("show bgp ipv4 unicast json")
	if err != nil {
		return nil, err
	}
	var doc struct {
		Routes map[string]json.RawMessage `json:"routes"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, fmt.Errorf("parse %q: %w", out, err)
	}
	return slices.Sorted(maps.Keys(doc.Routes)), nil
}
