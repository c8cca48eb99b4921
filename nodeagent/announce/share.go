package announce

// Shared VIPs (several Services holding one address under a sharing key): one
// VIP has one ledger object and one IPGroup, so the node selector and the
// interfaces are the same for every Service on it; what differs is
// externalTrafficPolicy Local. A node may carry the VIP (own it on L2,
// advertise it over BGP) only when it may carry it for every Service on it:
// for each Local one, it has a ready local endpoint. The operator lets two
// Local Services share only when they have one selector, so the intersection
// is empty only while endpoints move.

// jointCandidacy folds next, the candidacy of one more Service on a VIP, into
// prev, that of the Services already seen on it (had is false for the first).
func jointCandidacy(prev vipCandidacy, had bool, next vipCandidacy) vipCandidacy {
	if !had {
		return next
	}
	prev.LocalNodes = intersectNodes(prev.LocalNodes, next.LocalNodes)
	return prev
}

// intersectNodes is the nodes in both sets, where nil means every node.
func intersectNodes(a, b map[string]bool) map[string]bool {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	out := map[string]bool{}
	for n := range a {
		if b[n] {
			out[n] = true
		}
	}
	return out
}
