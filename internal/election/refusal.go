package election

// Refusal says why a node may not carry a VIP: the one answer Allowed and
// Eligible give as a boolean, in words a person can act on (vip-allocator
// explain prints them beside each node the election passed over).
type Refusal string

// The refusals, in the order NotEligible tests them.
const (
	RefusedClaims          Refusal = "its agent says the address is its own (an interface address, or the network or broadcast address of its subnet)"
	RefusedDraining        Refusal = "its agent is draining (stopping and handing its addresses over)"
	RefusedExcluded        Refusal = "it carries the label node.kubernetes.io/exclude-from-external-load-balancers; remove it to let the node carry addresses"
	RefusedCordoned        Refusal = "it is cordoned (spec.unschedulable) and --on-cordon is handover; uncordon it"
	RefusedSelector        Refusal = "the IPGroup's announce.nodeSelector does not select it; change the selector or the node's labels"
	RefusedNoLocalEndpoint Refusal = "externalTrafficPolicy is Local and no ready endpoint of the Service runs on it"
	RefusedNoInterface     Refusal = "no interface has an address on the VIP's subnet (or none the IPGroup's announce.interfaces allows)"
)
