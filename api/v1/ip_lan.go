package v1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InUseOnLAN is the InUseOnLAN condition of an address no node announces,
// when it is True: a host on the LAN answered the L2 owner's probe, and the
// message says which MAC and when. An address a node announces is never in
// use on the LAN by this account: another host's claim of it is a Conflict
// for its announcer, and a stale or forged verdict must not move a Service
// clients already reach.
func (ip *IP) InUseOnLAN() (*metav1.Condition, bool) {
	if len(ip.Status.AnnouncedBy) > 0 {
		return nil, false
	}
	c := meta.FindStatusCondition(ip.Status.Conditions, IPConditionInUseOnLAN)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil, false
	}
	return c, true
}

// EverAnnounced reports whether a node has announced the address, or may
// have: a node names itself in announcedBy, a probe found it silent (which
// its announcement follows), or another load balancer announced it before
// the operator adopted it. Only an address never announced is probed before
// its announcement; one announced before is announced at once by its next
// owner (a failover must not wait for a probe).
func (ip *IP) EverAnnounced() bool {
	if len(ip.Status.AnnouncedBy) > 0 {
		return true
	}
	if _, adopted := ip.Annotations[AdoptedAnnotation]; adopted {
		return true
	}
	c := meta.FindStatusCondition(ip.Status.Conditions, IPConditionInUseOnLAN)
	return c != nil && c.Status == metav1.ConditionFalse
}
