package explain

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/agentfacts"
	"github.com/paas-org/vip-allocator-operator/internal/metricsauth"
)

// Reader reads what a report is made from: the API objects, then each
// agent's facts about the addresses the report is about.
type Reader struct {
	Client client.Reader
	Kube   kubernetes.Interface
	// Namespace is the agents' (and the explain ServiceAccount's) namespace.
	Namespace string
	// AgentPort is the port of the agents' metrics server.
	AgentPort int
	// AgentURLs reach agents directly (node → base URL), for labs whose
	// agents are processes, not pods; empty: through the API server's
	// services/proxy on the agents' Service (agentfacts.Service), which needs
	// only the kubeconfig; the agent it lands on asks the node named.
	AgentURLs map[string]string
	// Token is presented to the agents; empty: a token of
	// agentfacts.ExplainServiceAccount is requested, for the agents' audience
	// and the lifetime the operator's policy allows (agentfacts.ExplainAudience,
	// agentfacts.ExplainTokenSeconds).
	Token string
	// Timeout bounds each agent's answer.
	Timeout time.Duration
}

// Read reads the cluster, then asks every agent about the addresses addrs
// picks from it.
func (r *Reader) Read(ctx context.Context, addrs func(*Observed) []netip.Addr) (*Observed, error) {
	o, err := r.readObjects(ctx)
	if err != nil {
		return nil, err
	}
	r.readFacts(ctx, o, addrs(o))
	return o, nil
}

func (r *Reader) readObjects(ctx context.Context) (*Observed, error) {
	o := &Observed{NamespaceLabels: map[string]map[string]string{}, Facts: map[string]*agentfacts.Facts{}, Unreachable: map[string]string{}}
	var (
		services   corev1.ServiceList
		namespaces corev1.NamespaceList
		groups     paasv1.IPGroupList
		ips        paasv1.IPList
		nodes      corev1.NodeList
		slices     discoveryv1.EndpointSliceList
		peers      paasv1.BGPPeerList
	)
	for _, l := range []client.ObjectList{&services, &namespaces, &groups, &ips, &nodes, &slices, &peers} {
		if err := r.Client.List(ctx, l); err != nil {
			return nil, fmt.Errorf("list %T: %w", l, err)
		}
	}
	o.Services, o.Groups, o.IPs, o.Nodes, o.Slices, o.Peers = services.Items, groups.Items, ips.Items, nodes.Items, slices.Items, peers.Items
	for _, ns := range namespaces.Items {
		o.NamespaceLabels[ns.Name] = ns.Labels
	}
	return o, nil
}

// readFacts asks every node's agent, at once, about addrs.
func (r *Reader) readFacts(ctx context.Context, o *Observed, addrs []netip.Addr) {
	fetch, err := r.fetcher(ctx)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range o.agentNodes() {
		if err != nil {
			o.Unreachable[n.Name] = err.Error()
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, r.Timeout)
			defer cancel()
			f, err := fetchAll(ctx, fetch, n.Name, addrs)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				o.Unreachable[n.Name] = err.Error()
				return
			}
			o.Facts[n.Name] = f
		})
	}
	wg.Wait()
}

// fetchAll asks node's agent about addrs, agentfacts.MaxVIPs at a time, and
// merges the answers: what is per VIP adds up, the rest is the last answer's.
func fetchAll(ctx context.Context, fetch fetchFunc, node string, addrs []netip.Addr) (*agentfacts.Facts, error) {
	var all *agentfacts.Facts
	for start := 0; start == 0 || start < len(addrs); start += agentfacts.MaxVIPs {
		q := url.Values{}
		for _, a := range addrs[start:min(start+agentfacts.MaxVIPs, len(addrs))] {
			q.Add(agentfacts.VIPParam, a.String())
		}
		f, err := fetch(ctx, node, q)
		if err != nil {
			return nil, err
		}
		if all != nil {
			merge(f, all)
		}
		all = f
	}
	return all, nil
}

// merge adds to f the per-VIP facts of an earlier answer.
func merge(f, earlier *agentfacts.Facts) {
	f.Ports = append(earlier.Ports, f.Ports...)
	if f.Announced == nil {
		f.Announced = map[string]time.Time{}
	}
	maps.Copy(f.Announced, earlier.Announced)
	if f.Advertised == nil && earlier.Advertised != nil {
		f.Advertised = map[string][]string{}
	}
	for peer, sent := range earlier.Advertised {
		f.Advertised[peer] = append(sent, f.Advertised[peer]...)
	}
}

// fetchFunc asks node's agent.
type fetchFunc func(ctx context.Context, node string, q url.Values) (*agentfacts.Facts, error)

// fetcher is how to ask the agents: directly, or through the API server.
func (r *Reader) fetcher(ctx context.Context) (fetchFunc, error) {
	token := r.Token
	if token == "" {
		tr, err := r.Kube.CoreV1().ServiceAccounts(r.Namespace).CreateToken(ctx, agentfacts.ExplainServiceAccount,
			TokenRequest(), metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("request a token of ServiceAccount %s/%s (bind Role vip-allocator-explainer to you): %w",
				r.Namespace, agentfacts.ExplainServiceAccount, err)
		}
		token = tr.Status.Token
	}
	if len(r.AgentURLs) > 0 {
		return r.direct(token), nil
	}
	return func(ctx context.Context, node string, q url.Values) (*agentfacts.Facts, error) {
		var body []byte
		var err error
		// The agent a request lands on answers one read at a time (429 to the
		// rest): a few tries, a little apart.
		for try := range 5 {
			req := r.Kube.CoreV1().RESTClient().Get().Namespace(r.Namespace).Resource("services").
				Name(ServiceProxyName(r.AgentPort)).SubResource("proxy").Suffix(agentfacts.Path).
				SetHeader(metricsauth.ProxiedTokenHeader, "Bearer "+token).Param(agentfacts.NodeParam, node)
			for k, vs := range q {
				for _, v := range vs {
					req = req.Param(k, v)
				}
			}
			body, err = req.DoRaw(ctx)
			if !apierrors.IsTooManyRequests(err) {
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(try+1) * 200 * time.Millisecond):
			}
		}
		if err != nil {
			return nil, fmt.Errorf("through Service %s/%s: %w", r.Namespace, agentfacts.Service, err)
		}
		return decodeFacts(body)
	}, nil
}

// ServiceProxyName is the name explain proxies to through the API server: the
// agents' Service (agentfacts.Service), over HTTPS, on port (the agents'
// metrics port). The Role vip-allocator-explainer allows services/proxy on it
// alone.
func ServiceProxyName(port int) string {
	return "https:" + agentfacts.Service + ":" + strconv.Itoa(port)
}

// TokenRequest is the TokenRequest explain makes: the audience and
// lifetime config/admission/explain_token.yaml holds every request of the
// explain ServiceAccount to.
func TokenRequest() *authnv1.TokenRequest {
	return &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		Audiences:         []string{agentfacts.ExplainAudience},
		ExpirationSeconds: ptr.To[int64](agentfacts.ExplainTokenSeconds)}}
}

// direct asks the agents at AgentURLs. Their certificate is self-signed in
// memory, so it is not verified: the token sent is the explain
// ServiceAccount's, which may read the debug path and nothing else.
func (r *Reader) direct(token string) fetchFunc {
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above
	return func(ctx context.Context, node string, q url.Values) (*agentfacts.Facts, error) {
		base, ok := r.AgentURLs[node]
		if !ok {
			return nil, errors.New("no --agent-url names it")
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+agentfacts.Path+"?"+q.Encode(), nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s: HTTP %d: %s", base, resp.StatusCode, body)
		}
		return decodeFacts(body)
	}
}

func decodeFacts(body []byte) (*agentfacts.Facts, error) {
	var f agentfacts.Facts
	if err := json.Unmarshal(body, &f); err != nil {
		return nil, fmt.Errorf("read the agent's answer: %w", err)
	}
	return &f, nil
}
