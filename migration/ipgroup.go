package migration

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
)

// coveringGroup finds the IPGroup that will hold addr: an existing one that may
// hand it to the Service, or one to create from the GroupSegmentMapping (never
// a second group over a segment another group already covers).
func coveringGroup(o Observed, addr netip.Addr) (group *paasv1.IPGroup, create bool, d Decision, blocked bool) {
	var containing, usable []string
	var chosen *paasv1.IPGroup
	parsed := map[string]*allocator.Group{}
	for i := range o.Groups {
		g, err := k8salloc.Group(&o.Groups[i])
		if err != nil || !g.Contains(addr) {
			continue
		}
		parsed[g.Name] = g
		containing = append(containing, g.Name)
		if g.IsExcluded(addr) {
			continue
		}
		usable = append(usable, g.Name)
		if chosen == nil || lessGroup(g, parsed[chosen.Name]) {
			if admits(o, g) {
				chosen = &o.Groups[i]
			}
		}
	}
	switch {
	case chosen != nil:
		return chosen, false, Decision{}, false
	case len(usable) > 0:
		return nil, false, refuse(ReasonGroupNotAllowed, "%s is in IPGroup %s, which does not admit Service %s/%s (namespaceSelector, serviceSelector or the vip.paas.org/ipgroup annotation); change the selectors or the annotation and the migration resumes",
			addr, strings.Join(usable, ", "), o.Service.Namespace, o.Service.Name), true
	case len(containing) > 0:
		return nil, false, refuse(ReasonIPExcluded, "%s is excluded from IPGroup %s (spec.excludedIPs, or avoidBuggyIPs for a .0 or .255 address); remove it from excludedIPs (or turn avoidBuggyIPs off) and the migration resumes", addr, strings.Join(containing, ", ")), true
	}
	if o.GSM == nil {
		gsm := o.VIP.Status.GSM
		return nil, false, refuse(ReasonNoIPGroup, "%s is in no IPGroup and GroupSegmentMapping %q (status.gsm) does not exist to build one from; create an IPGroup whose segment holds %s and the migration resumes", addr, gsm, addr), true
	}
	g, err := ipGroupFromGSM(o.GSM)
	if err != nil {
		return nil, false, refuse(ReasonNoIPGroup, "%s is in no IPGroup and GroupSegmentMapping %s cannot become one: %s; create an IPGroup whose segment holds %s and the migration resumes", addr, o.GSM.Name, err, addr), true
	}
	segment := netip.MustParsePrefix(g.Spec.Segment)
	if !segment.Contains(addr) {
		return nil, false, refuse(ReasonNoIPGroup, "%s is in no IPGroup and outside the segment %s of GroupSegmentMapping %s; create an IPGroup whose segment holds %s and the migration resumes", addr, segment, o.GSM.Name, addr), true
	}
	for i := range o.Groups {
		other := &o.Groups[i]
		theirs, err := k8salloc.Group(other)
		if other.Name == g.Name || (err == nil && theirs.Overlaps(mustParse(g))) {
			return nil, false, refuse(ReasonIPGroupConflict, "%s is in no IPGroup, and the IPGroup to make from GroupSegmentMapping %s (%s) would clash with IPGroup %s (%s); widen that group to hold %s and the migration resumes",
				addr, o.GSM.Name, segment, other.Name, other.Spec.DescribeParts(), addr), true
		}
	}
	if !admits(o, mustParse(g)) {
		return nil, false, refuse(ReasonGroupNotAllowed, "Service %s/%s names IPGroup %s in vip.paas.org/ipgroup, but %s will be in IPGroup %s; remove the annotation and the migration resumes",
			o.Service.Namespace, o.Service.Name, o.Service.Annotations[paasv1.IPGroupAnnotation], addr, g.Name), true
	}
	return g, true, Decision{}, false
}

// ipGroupFromGSM is the IPGroup equivalent of a GroupSegmentMapping: same name,
// segment and exclusions. It hands out nothing to other Services by itself
// (autoAssign false): migrating must not change where new Services get IPs.
func ipGroupFromGSM(gsm *paasv1.GroupSegmentMapping) (*paasv1.IPGroup, error) {
	segment, err := netip.ParsePrefix(gsm.Spec.Segment)
	if err != nil {
		return nil, fmt.Errorf("segment %q is not a CIDR", gsm.Spec.Segment)
	}
	g := &paasv1.IPGroup{
		ObjectMeta: metav1.ObjectMeta{Name: gsm.Name, Labels: map[string]string{paasv1.CreatedFromGSMLabel: gsm.Name}},
		Spec: paasv1.IPGroupSpec{Segment: segment.Masked().String(), ExcludedIPs: slices.Clone(gsm.Spec.ExcludedIPs),
			AutoAssign: new(bool)},
	}
	if _, err := k8salloc.Group(g); err != nil {
		return nil, err
	}
	return g, nil
}

func mustParse(g *paasv1.IPGroup) *allocator.Group {
	p, err := k8salloc.Group(g)
	if err != nil {
		panic(err) // ipGroupFromGSM parsed it already
	}
	return p
}

// admits reports whether g may hand its address to the target Service, as the
// allocator will judge it.
func admits(o Observed, g *allocator.Group) bool {
	if named := k8salloc.NamedGroups(o.Service); len(named) > 0 && !slices.Contains(named, g.Name) {
		return false
	}
	return g.Admits == nil || g.Admits(o.NamespaceLabels, o.Service.Labels)
}

func lessGroup(x, y *allocator.Group) bool {
	return x.Priority < y.Priority || (x.Priority == y.Priority && x.Name < y.Name)
}
