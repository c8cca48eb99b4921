package v1

import "time"

// AdoptedAnnotation on a ledger IP object records when the operator adopted its address from a
// Service's status that another load balancer (MetalLB) wrote (RFC 3339). That load balancer's
// speaker may still answer ARP/NDP for the address while the agents take it over: the hand-over
// of docs/migration.md "From MetalLB", as keepalived's is for a migrating VirtualIP.
const AdoptedAnnotation = "vip.paas.org/adopted"

// AdoptionHandOver is how long after the adoption the agents expect the other load balancer's
// speaker to answer for the address too, and report no conflict: the time to remove it. A
// speaker still answering after that is the conflict it then is.
const AdoptionHandOver = 15 * time.Minute

// HandOverExpected reports whether another load balancer may still answer for ip's address at
// now: its address was adopted less than AdoptionHandOver ago. The layer-2 split-brain
// detector must not raise an alarm for such an address.
func (ip *IP) HandOverExpected(now time.Time) bool {
	at, err := time.Parse(time.RFC3339, ip.Annotations[AdoptedAnnotation])
	return err == nil && !now.Before(at) && now.Sub(at) < AdoptionHandOver
}
