package explain

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/agentfacts"
	"github.com/paas-org/vip-allocator-operator/internal/metricsauth"
)

// TestReadFactsThroughTheAPIServer: by default explain asks for a token of
// the explain ServiceAccount, for the agents' audience and the operator's
// lifetime, and asks each node's agent through services/proxy on the agents'
// Service (never a pod's proxy), naming the node, the token in the header the
// API server passes on (it consumes Authorization); a node whose agent cannot
// be asked is reported, not skipped, and a busy agent (429) is asked again.
func TestReadFactsThroughTheAPIServer(t *testing.T) {
	const ns = paasv1.DefaultNamespace
	var proxied []string
	busy := 1
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch p := r.URL.Path; {
		case r.Method == http.MethodPost && p == "/api/v1/namespaces/"+ns+"/serviceaccounts/"+agentfacts.ExplainServiceAccount+"/token":
			var tr authnv1.TokenRequest
			_ = json.NewDecoder(r.Body).Decode(&tr)
			if !slices.Equal(tr.Spec.Audiences, []string{agentfacts.ExplainAudience}) || tr.Spec.ExpirationSeconds == nil || *tr.Spec.ExpirationSeconds != agentfacts.ExplainTokenSeconds {
				t.Errorf("token request %+v: want the agents' audience and %d seconds", tr.Spec, agentfacts.ExplainTokenSeconds)
			}
			_ = json.NewEncoder(w).Encode(authnv1.TokenRequest{Status: authnv1.TokenRequestStatus{Token: "explain-token"}})
		case strings.HasPrefix(p, "/api/v1/namespaces/"+ns+"/services/https:"+agentfacts.Service+":9478/proxy"+agentfacts.Path):
			node := r.URL.Query().Get(agentfacts.NodeParam)
			if node == "node2" {
				http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"no node node2","code":502}`, http.StatusBadGateway)
				return
			}
			if busy > 0 {
				busy--
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429}`))
				return
			}
			proxied = append(proxied, r.Header.Get(metricsauth.ProxiedTokenHeader)+" "+node+" "+r.URL.Query().Get(agentfacts.VIPParam))
			_ = json.NewEncoder(w).Encode(agentfacts.Facts{Node: "node1", Ports: []agentfacts.Port{{VIP: vip, Protocol: "TCP", Port: 80}}})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	r := &Reader{Kube: kube, Namespace: ns, AgentPort: paasv1.AgentMetricsPort, Timeout: 5 * time.Second}
	o := lab()
	o.Facts, o.Unreachable = map[string]*agentfacts.Facts{}, map[string]string{}
	o.Nodes = o.Nodes[:2]
	r.readFacts(context.Background(), o, []netip.Addr{netip.MustParseAddr(vip)})

	if len(proxied) != 1 || proxied[0] != "Bearer explain-token node1 "+vip {
		t.Fatalf("proxied requests %q, want one with the explain token, for node1, about %s", proxied, vip)
	}
	if f := o.Facts["node1"]; f == nil || len(f.Ports) != 1 {
		t.Fatalf("node1's facts %+v", f)
	}
	if why := o.Unreachable["node2"]; why == "" {
		t.Fatalf("node2 (its agent not reached): want it reported")
	}
}

// TestFetchAllAsksInBatches: more addresses than one request may name are
// asked in batches, and the answers add up.
func TestFetchAllAsksInBatches(t *testing.T) {
	var addrs []netip.Addr
	for i := range 130 {
		addrs = append(addrs, netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}))
	}
	calls := 0
	fetch := func(_ context.Context, node string, q url.Values) (*agentfacts.Facts, error) {
		calls++
		vips := q[agentfacts.VIPParam]
		if len(vips) > agentfacts.MaxVIPs {
			t.Fatalf("one request names %d addresses", len(vips))
		}
		f := &agentfacts.Facts{Node: node, Announced: map[string]time.Time{vips[0]: time.Unix(1, 0)}, Advertised: map[string][]string{"tor1": {vips[0]}}}
		for _, v := range vips {
			f.Ports = append(f.Ports, agentfacts.Port{VIP: v, Protocol: "TCP", Port: 80})
		}
		return f, nil
	}
	f, err := fetchAll(context.Background(), fetch, "node1", addrs)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 3 || len(f.Ports) != 130 || len(f.Announced) != 3 || len(f.Advertised["tor1"]) != 3 {
		t.Fatalf("%d calls, %d ports, announced %v, advertised %v: want 3 calls and every answer kept", calls, len(f.Ports), f.Announced, f.Advertised)
	}
}
