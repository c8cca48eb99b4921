package allocator

import (
	"fmt"
	"slices"
	"strings"
)

// NotAdmitted is why g gives req's Service no address of family fam ("" when
// it may): the test candidates makes of each group, told to a person
// (vip-allocator explain prints it beside each group that turned a Service
// away). Whether g has a free address is another question.
func NotAdmitted(g *Group, fam Family, req Request) string {
	named := len(req.Groups) > 0
	switch {
	case named && !slices.Contains(req.Groups, g.Name):
		return fmt.Sprintf("the Service names IPGroup %s in vip.paas.org/ipgroup", strings.Join(req.Groups, ", "))
	case !named && !g.AutoAssign:
		return "autoAssign is false: only a Service that names it in vip.paas.org/ipgroup gets its addresses"
	case !g.HasFamily(fam):
		return fmt.Sprintf("it has no %s addresses", fam)
	case g.ClusterPolicyOnly && req.LocalPolicy:
		return "it " + clusterPolicyOnly
	case !selectorsAdmit(g, req):
		return "its namespaceSelector or serviceSelector does not match this Service; change the selectors or the labels"
	}
	return ""
}
