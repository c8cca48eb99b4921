package migration

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// What "migrate metallb apply" finds in place and must not touch by
// resemblance: MetalLB's controller Deployment is the one Deployment of
// MetalLB's namespace that its manifests or its Helm chart label as MetalLB's
// controller, identified once by the plan (name and uid); an IPGroup of a
// converted pool's name that exists already is the converted one only if it is
// identical.

// metallbController finds MetalLB's controller Deployment among ds (MetalLB's
// namespace): labelled component=controller and app=metallb by MetalLB's
// manifests, app.kubernetes.io/component=controller and
// app.kubernetes.io/name=metallb by its Helm chart. Another controller
// Deployment of the namespace is named, not touched; two that both look like
// MetalLB's are a problem for a person.
func metallbController(ds []appsv1.Deployment) (controller *Object, notTouched []string, problem string) {
	var candidates []Object
	for _, d := range ds {
		l := d.Labels
		if l["component"] != "controller" && l["app.kubernetes.io/component"] != "controller" {
			continue
		}
		obj := Object{"Deployment", d.Namespace, d.Name, d.UID}
		if l["app"] != "metallb" && l["app.kubernetes.io/name"] != "metallb" {
			notTouched = append(notTouched, fmt.Sprintf("%s: labelled a controller, but not MetalLB's (neither app=metallb nor app.kubernetes.io/name=metallb)", obj))
			continue
		}
		candidates = append(candidates, obj)
	}
	switch len(candidates) {
	case 0:
		return nil, notTouched, ""
	case 1:
		return &candidates[0], notTouched, ""
	}
	var names []string
	for _, c := range candidates {
		names = append(names, c.String())
		notTouched = append(notTouched, fmt.Sprintf("%s: one of %d Deployments labelled as MetalLB's controller", c, len(candidates)))
	}
	return nil, notTouched, fmt.Sprintf("%s are all labelled as MetalLB's controller: --scale-down-controller scales none of them; scale the one that runs MetalLB's controller to 0 by hand", strings.Join(names, ", "))
}

// existingGroup compares the IPGroup a pool converts to with an IPGroup of the
// same name that exists already: identical when it is the same, else conflict
// says why apply refuses it; both zero when there is none.
func existingGroup(converted *paasv1.IPGroup, groups []paasv1.IPGroup) (identical bool, conflict string) {
	i := slices.IndexFunc(groups, func(g paasv1.IPGroup) bool { return g.Name == converted.Name })
	if i < 0 {
		return false, ""
	}
	differ := groupSpecDiffers(converted.Spec, groups[i].Spec)
	if len(differ) == 0 {
		return true, ""
	}
	return false, fmt.Sprintf("IPGroup %s exists and differs from the conversion in spec.%s: apply leaves it and refuses to go on with this pool; delete or rename it (or make it the same) and plan again",
		converted.Name, strings.Join(differ, ", spec."))
}

// groupSpecDiffers names the fields of spec in which a and b differ, once the
// defaults the API server fills in are filled in on both.
func groupSpecDiffers(a, b paasv1.IPGroupSpec) []string {
	am, bm := specFields(withGroupDefaults(a)), specFields(withGroupDefaults(b))
	var differ []string
	for k := range am {
		if string(am[k]) != string(bm[k]) {
			differ = append(differ, k)
		}
	}
	for k := range bm {
		if _, ok := am[k]; !ok {
			differ = append(differ, k)
		}
	}
	slices.Sort(differ)
	return differ
}

// withGroupDefaults fills in the IPGroup CRD's defaults (autoAssign true,
// announce {mode: L2}).
func withGroupDefaults(s paasv1.IPGroupSpec) paasv1.IPGroupSpec {
	s = *s.DeepCopy()
	if s.AutoAssign == nil {
		s.AutoAssign = ptr.To(true)
	}
	if s.Announce == nil {
		s.Announce = &paasv1.Announce{}
	}
	if s.Announce.Mode == "" {
		s.Announce.Mode = paasv1.AnnounceL2
	}
	return s
}

// specFields is spec as JSON fields, each field's value still JSON.
func specFields(s paasv1.IPGroupSpec) map[string]json.RawMessage {
	data, err := json.Marshal(s)
	if err != nil {
		panic(err) // a struct of plain fields always marshals
	}
	out := map[string]json.RawMessage{}
	if err := json.Unmarshal(data, &out); err != nil {
		panic(err)
	}
	return out
}
