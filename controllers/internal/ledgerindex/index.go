package ledgerindex

import (
	"context"
	"fmt"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// byGroup indexes ledger objects by the ipgroup label (Unlabelled
// for those without: the original operator's, not yet adopted).
const byGroup = "metadata.labels.ipgroup"

// Unlabelled is the index value of a ledger object with no ipgroup label:
// never a label value.
const Unlabelled = "<none>"

// indexed records the caches the index was registered with: the Service
// and IPGroup reconcilers both use it, and either may be set up first.
var indexed sync.Map

// IndexByGroup registers byGroup with mgr's cache, once.
func IndexByGroup(mgr ctrl.Manager) error {
	if _, done := indexed.LoadOrStore(mgr.GetCache(), true); done {
		return nil
	}
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &paasv1.IP{}, byGroup, func(o client.Object) []string {
		if g := o.GetLabels()[paasv1.IPGroupLabel]; g != "" {
			return []string{g}
		}
		return []string{Unlabelled}
	})
	if err != nil {
		return fmt.Errorf("index IPs by IPGroup: %w", err)
	}
	return nil
}

// OfGroups lists, uncopied (read only), the ledger objects labelled
// with each of groups.
func OfGroups(ctx context.Context, c client.Reader, groups ...string) ([]paasv1.IP, error) {
	var out []paasv1.IP
	for _, g := range groups {
		var list paasv1.IPList
		if err := c.List(ctx, &list, client.MatchingFields{byGroup: g}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("list the ledger of IPGroup %s: %w", g, err)
		}
		out = append(out, list.Items...)
	}
	return out, nil
}
