package ipgroup

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/internal/returnplan"
)

// setReturnPathCondition says whether the replies to the group's VIPs get back to the network
// their requests arrive on, on every node announce.nodeSelector selects (all of them for a
// group announced by None): the agents' own
// decision (returnplan.Decide) over what each published of its interfaces and routes. What a
// node's agent publishes only decides what the condition says of that node.
func setReturnPathCondition(status *paasv1.IPGroupStatus, group *paasv1.IPGroup, nodes []corev1.Node, peers []paasv1.BGPPeer, onCordon election.OnCordon) {
	g, ok := returnplan.GroupOf(group, peers)
	// A group the agents do not announce (None) reaches the nodes by static routes: every
	// node may get its traffic.
	c, announced := election.CandidacyOf(group)
	if !ok {
		meta.RemoveStatusCondition(&status.Conditions, paasv1.IPGroupReturnPath)
		return // Ready says what is wrong
	}
	var needing, missing []string
	for i := range nodes {
		value, agent := nodes[i].Annotations[paasv1.NodeInterfacesAnnotation]
		if !agent || (announced && !election.Selects(c, onCordon.NodeOf(&nodes[i]))) {
			continue
		}
		plan := returnplan.Decide(returnplan.Published(paasv1.ParseNodeInterfaces(value)), []returnplan.Group{g})
		if len(plan.Paths) > 0 || len(plan.Missing) > 0 {
			needing = append(needing, nodes[i].Name)
		}
		for _, m := range plan.Missing {
			missing = append(missing, fmt.Sprintf("%s (%s, %s)", nodes[i].Name, m.Interface, m.Family))
		}
	}
	if len(needing) == 0 {
		meta.RemoveStatusCondition(&status.Conditions, paasv1.IPGroupReturnPath)
		return
	}
	cond := metav1.Condition{Type: paasv1.IPGroupReturnPath, ObservedGeneration: group.Generation,
		Status: metav1.ConditionTrue, Reason: paasv1.ReasonRouterKnown,
		Message: fmt.Sprintf("%d node(s) on several networks send the replies to the group's VIPs back by the network they came in on: %s", len(needing), firstNames(needing))}
	if len(missing) > 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, paasv1.ReasonNoRouterBack
		cond.Message = fmt.Sprintf("no router back on the group's network for %s: replies to the VIPs arriving there leave by the node's default route, on another network; set spec.announce.gateway (ipv4, ipv6) to the router on the group's network",
			firstNames(missing))
	}
	meta.SetStatusCondition(&status.Conditions, cond)
}
