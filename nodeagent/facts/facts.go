// Package facts serves what this agent knows of its own node to
// `vip-allocator explain` (the contract is internal/agentfacts): its view of
// the other agents, what its kernel holds for the VIPs asked about, and which
// VIPs it answers ARP/NDP for. It only reads; the metrics server in front of
// it lets in only callers allowed to get agentfacts.Path
// (internal/metricsauth), since what a node carries is no one else's business.
package facts

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"time"

	"github.com/paas-org/vip-allocator-operator/internal/agentfacts"
	"github.com/paas-org/vip-allocator-operator/internal/metricsauth"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

// Handler answers GET agentfacts.Path?vip=A&vip=B.
type Handler struct {
	NodeName string
	OnCordon string
	// Alive maps every alive agent to whether it is draining (the gossip's view).
	Alive func() map[string]bool
	// Answering are the VIPs this node answers ARP/NDP for, by interface.
	Answering func() map[netip.Addr]string
	Planes    []dataplane.Plane
	// Announced is when the last gratuitous announcement of vip was sent
	// (zero: none, or not yet when ctx ends).
	Announced func(ctx context.Context, vip netip.Addr) time.Time
	// AdjOut lists the routes of prefixes sent to each BGP peer (nil: none).
	AdjOut func(ctx context.Context, prefixes []netip.Prefix) (map[string][]netip.Prefix, error)
	Now    func() time.Time
	// Forward asks the agent of node for its facts with the query q (its
	// NodeParam dropped), presenting authorization (the caller's token, which
	// that agent checks again); nil: only this node's facts are served.
	Forward func(ctx context.Context, node string, q url.Values, authorization string) (body []byte, status int, err error)

	// busy holds the one read being answered: each dumps the kernel's
	// ruleset, so a second caller is told to come back (429), not queued.
	busy sync.Mutex
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet {
		http.Error(w, "only GET", http.StatusMethodNotAllowed)
		return
	}
	if node := req.URL.Query().Get(agentfacts.NodeParam); node != "" && node != h.NodeName {
		h.forward(w, req, node)
		return
	}
	if !h.busy.TryLock() {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "another read of this node's facts is being answered: retry", http.StatusTooManyRequests)
		return
	}
	defer h.busy.Unlock()
	vips, err := parseVIPs(req.URL.Query()[agentfacts.VIPParam])
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	f := h.facts(vips)
	h.announced(req.Context(), &f, vips)
	h.advertised(req.Context(), &f, vips)
	_ = json.NewEncoder(w).Encode(f)
}

// forward answers a request for another node's facts with that node's agent's answer.
func (h *Handler) forward(w http.ResponseWriter, req *http.Request, node string) {
	if h.Forward == nil {
		http.Error(w, "this agent serves its own node's facts only", http.StatusNotFound)
		return
	}
	q := req.URL.Query()
	q.Del(agentfacts.NodeParam)
	if _, err := parseVIPs(q[agentfacts.VIPParam]); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	auth := req.Header.Get("Authorization")
	if auth == "" {
		auth = req.Header.Get(metricsauth.ProxiedTokenHeader)
	}
	body, status, err := h.Forward(req.Context(), node, q, auth)
	if err != nil {
		http.Error(w, fmt.Sprintf("the agent of node %s: %v", node, err), http.StatusBadGateway)
		return
	}
	if status == http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// parseVIPs reads the VIPs asked about, at most agentfacts.MaxVIPs.
func parseVIPs(values []string) ([]netip.Addr, error) {
	if len(values) > agentfacts.MaxVIPs {
		return nil, fmt.Errorf("at most %d %s parameters", agentfacts.MaxVIPs, agentfacts.VIPParam)
	}
	out := make([]netip.Addr, 0, len(values))
	for _, v := range values {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", agentfacts.VIPParam, v, err)
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}

// facts reads them now.
func (h *Handler) facts(vips []netip.Addr) agentfacts.Facts {
	f := agentfacts.Facts{Node: h.NodeName, At: h.Now().UTC(), OnCordon: h.OnCordon, Alive: h.Alive(),
		Answering: map[string]string{}, Ports: []agentfacts.Port{}}
	for vip, iface := range h.Answering() {
		f.Answering[vip.String()] = iface
	}
	for _, p := range h.Planes {
		pl := agentfacts.Plane{Family: string(p.Family()), Backend: p.Backend()}
		r, ok := p.(dataplane.HeldReader)
		if !ok {
			pl.Error = "this plane cannot read its kernel state back"
			f.Planes = append(f.Planes, pl)
			continue
		}
		held, err := r.Held(vips)
		if err != nil {
			pl.Error = err.Error()
		}
		for _, x := range held {
			port := agentfacts.Port{VIP: x.VIP.String(), Protocol: string(x.Protocol), Port: int32(x.Port), Endpoints: []string{}}
			for _, ep := range x.Endpoints {
				port.Endpoints = append(port.Endpoints, ep.String())
			}
			f.Ports = append(f.Ports, port)
		}
		f.Planes = append(f.Planes, pl)
	}
	return f
}

// advertised adds which of vips each BGP session has sent to its router.
func (h *Handler) advertised(ctx context.Context, f *agentfacts.Facts, vips []netip.Addr) {
	if h.AdjOut == nil {
		return
	}
	prefixes := make([]netip.Prefix, 0, len(vips))
	for _, v := range vips {
		prefixes = append(prefixes, netip.PrefixFrom(v, v.BitLen()))
	}
	out, err := h.AdjOut(ctx, prefixes)
	if err != nil {
		f.Errors = append(f.Errors, err.Error())
		return
	}
	f.Advertised = map[string][]string{}
	for peer, ps := range out {
		f.Advertised[peer] = []string{}
		for _, p := range ps {
			f.Advertised[peer] = append(f.Advertised[peer], p.Addr().String())
		}
	}
}

// announced adds when the last gratuitous announcement of each of vips this
// node answers for was sent; one still queued is not waited for long.
func (h *Handler) announced(ctx context.Context, f *agentfacts.Facts, vips []netip.Addr) {
	if h.Announced == nil {
		return
	}
	f.Announced = map[string]time.Time{}
	for _, vip := range vips {
		if _, ok := f.Answering[vip.String()]; !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		if at := h.Announced(ctx, vip); !at.IsZero() {
			f.Announced[vip.String()] = at.UTC()
		}
		cancel()
	}
}
