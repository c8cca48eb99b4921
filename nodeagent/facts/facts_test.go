package facts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/internal/agentfacts"
	"github.com/paas-org/vip-allocator-operator/internal/metricsauth"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

// plane is a data plane whose kernel holds held, or fails to be read.
type plane struct {
	dataplane.Plane
	fam   dataplane.Family
	held  []dataplane.Held
	err   error
	asked []netip.Addr
}

func (p *plane) Family() dataplane.Family { return p.fam }
func (p *plane) Backend() string          { return "nftables" }
func (p *plane) Held(vips []netip.Addr) ([]dataplane.Held, error) {
	p.asked = vips
	return p.held, p.err
}

func TestHandler(t *testing.T) {
	vip := netip.MustParseAddr("192.0.2.40")
	v4 := &plane{fam: dataplane.IPv4, held: []dataplane.Held{{VIP: vip, Protocol: dataplane.TCP, Port: 80,
		Endpoints: []netip.AddrPort{netip.MustParseAddrPort("198.51.100.11:8080")}}}}
	v6 := &plane{fam: dataplane.IPv6, err: errors.New("netlink: permission denied")}
	h := &Handler{NodeName: "node1", OnCordon: "handover", Planes: []dataplane.Plane{v4, v6},
		Alive:     func() map[string]bool { return map[string]bool{"node1": false, "node2": true} },
		Answering: func() map[netip.Addr]string { return map[netip.Addr]string{vip: "eth0"} },
		Now:       func() time.Time { return time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC) },
		Announced: func(context.Context, netip.Addr) time.Time {
			return time.Date(2026, 11, 29, 8, 59, 0, 0, time.UTC)
		},
		AdjOut: func(_ context.Context, ps []netip.Prefix) (map[string][]netip.Prefix, error) {
			return map[string][]netip.Prefix{"tor1": ps, "tor2": {}}, nil
		}}

	get := func(method, query string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, agentfacts.Path+query, nil))
		return rec
	}
	rec := get(http.MethodGet, "?vip=192.0.2.40")
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
	}
	var f agentfacts.Facts
	if err := json.Unmarshal(rec.Body.Bytes(), &f); err != nil {
		t.Fatal(err)
	}
	if len(v4.asked) != 1 || v4.asked[0] != vip {
		t.Errorf("the plane was asked about %v, want only %s", v4.asked, vip)
	}
	if f.Node != "node1" || !f.Alive["node2"] || f.Answering[vip.String()] != "eth0" || len(f.Ports) != 1 ||
		f.Ports[0].Endpoints[0] != "198.51.100.11:8080" || f.Ports[0].Protocol != "TCP" || f.Ports[0].Port != 80 {
		t.Errorf("facts %+v", f)
	}
	if fmt.Sprint(f.Advertised) != "map[tor1:[192.0.2.40] tor2:[]]" {
		t.Errorf("advertised %v: want %s sent to tor1 alone", f.Advertised, vip)
	}
	if at := f.Announced[vip.String()]; !at.Equal(time.Date(2026, 11, 29, 8, 59, 0, 0, time.UTC)) || len(f.Announced) != 1 {
		t.Errorf("announced %v: want %s's last gratuitous ARP", f.Announced, vip)
	}
	if len(f.Planes) != 2 || f.Planes[0].Error != "" || !strings.Contains(f.Planes[1].Error, "permission denied") {
		t.Errorf("planes %+v: want the IPv6 plane's read error reported", f.Planes)
	}

	for _, bad := range []struct {
		method, query string
		want          int
	}{
		{http.MethodPost, "?vip=192.0.2.40", http.StatusMethodNotAllowed},
		{http.MethodGet, "?vip=192.0.2.400", http.StatusBadRequest},
		{http.MethodGet, "?vip=" + strings.Repeat("192.0.2.1&vip=", agentfacts.MaxVIPs) + "192.0.2.2", http.StatusBadRequest},
	} {
		if rec := get(bad.method, bad.query); rec.Code != bad.want {
			t.Errorf("%s %s: HTTP %d, want %d", bad.method, bad.query[:min(len(bad.query), 30)], rec.Code, bad.want)
		}
	}
}

// blockingPlane is a plane whose ruleset dump waits for release.
type blockingPlane struct {
	plane
	started, release chan struct{}
}

func (p *blockingPlane) Held(_ []netip.Addr) ([]dataplane.Held, error) {
	p.started <- struct{}{}
	<-p.release
	return nil, nil
}

// One facts read at a time: each dumps the kernel's ruleset, so a second
// caller while one is answered is told to come back, not queued.
func TestHandlerOneReadAtATime(t *testing.T) {
	p := &blockingPlane{plane: plane{fam: dataplane.IPv4}, started: make(chan struct{}), release: make(chan struct{})}
	h := &Handler{NodeName: "node1", Planes: []dataplane.Plane{p}, Now: time.Now,
		Alive:     func() map[string]bool { return map[string]bool{} },
		Answering: func() map[netip.Addr]string { return map[netip.Addr]string{} }}
	first := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, agentfacts.Path+"?vip=192.0.2.40", nil))
		first <- rec.Code
	}()
	<-p.started
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, agentfacts.Path+"?vip=192.0.2.41", nil))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Errorf("a second read during the first: HTTP %d, want 429 with Retry-After", rec.Code)
	}
	close(p.release)
	if code := <-first; code != http.StatusOK {
		t.Errorf("the first read: HTTP %d", code)
	}
	go func() {
		for range p.started {
		}
	}()
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, agentfacts.Path+"?vip=192.0.2.41", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("a read after the first: HTTP %d", rec.Code)
	}
	close(p.started)
}

// A read for another node is that node's agent's answer, asked with the
// caller's token; this agent reads nothing of its own for it.
func TestHandlerForwards(t *testing.T) {
	var asked struct {
		node, auth string
		q          url.Values
	}
	h := &Handler{NodeName: "node1", Forward: func(_ context.Context, node string, q url.Values, auth string) ([]byte, int, error) {
		asked.node, asked.q, asked.auth = node, q, auth
		if node == "gone" {
			return nil, 0, errors.New("no node gone")
		}
		return []byte(`{"node":"node2"}`), http.StatusOK, nil
	}}
	get := func(query string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, agentfacts.Path+query, nil)
		req.Header.Set(metricsauth.ProxiedTokenHeader, "Bearer explain-token")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	rec := get("?node=node2&vip=192.0.2.40")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "node2") {
		t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
	}
	if asked.node != "node2" || asked.auth != "Bearer explain-token" || asked.q.Has(agentfacts.NodeParam) || asked.q.Get(agentfacts.VIPParam) != "192.0.2.40" {
		t.Errorf("asked %+v", asked)
	}
	if rec := get("?node=gone"); rec.Code != http.StatusBadGateway {
		t.Errorf("an unknown node: HTTP %d, want 502", rec.Code)
	}
	if rec := get("?node=node2&vip=nonsense"); rec.Code != http.StatusBadRequest {
		t.Errorf("a bad VIP: HTTP %d, want 400 before anything is forwarded", rec.Code)
	}
}
