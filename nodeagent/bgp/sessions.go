package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	api "github.com/osrg/gobgp/v4/api"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// Session is the state of the session with one peer.
type Session struct {
	Peer         string // the BGPPeer's name
	Address      string
	State        string // Idle, Connect, Active, OpenSent, OpenConfirm, Established
	Since        time.Time
	PrefixesSent int
	// Message is why the session is not established, as GoBGP last said.
	Message string
	// BFD is the state of the BFD session next to it (paasv1.BFDUp, ...), or
	// paasv1.BFDNotConfigured; BFDMessage says why it is not up.
	BFD        string
	BFDMessage string
	// LocalASN, RouterID and Source are what the node peers as: its ASN, its
	// router ID, and the address the session leaves from (invalid: the
	// kernel's choice).
	LocalASN uint32
	RouterID netip.Addr
	Source   netip.Addr
	// OverPrefixLimit: the node closed the session because the router sent
	// more than maxPrefixes routes; it connects again after prefixLimitRestart.
	OverPrefixLimit bool
}

// Established is the RFC 4271 name of an up session.
const Established = "Established"

var stateNames = map[api.PeerState_SessionState]string{
	api.PeerState_SESSION_STATE_UNSPECIFIED: "Idle",
	api.PeerState_SESSION_STATE_IDLE:        "Idle",
	api.PeerState_SESSION_STATE_CONNECT:     "Connect",
	api.PeerState_SESSION_STATE_ACTIVE:      "Active",
	api.PeerState_SESSION_STATE_OPENSENT:    "OpenSent",
	api.PeerState_SESSION_STATE_OPENCONFIRM: "OpenConfirm",
	api.PeerState_SESSION_STATE_ESTABLISHED: Established,
}

// Sessions reports every configured peer's session, sorted by peer name.
func (s *Speaker) Sessions(ctx context.Context) []Session {
	s.mu.Lock()
	byAddr := map[string]string{}
	peers := maps.Clone(s.peers)
	for name, p := range s.peers {
		byAddr[p.Address.String()] = name
	}
	started, srv, routerID := s.started, s.server, s.routerID
	var out []Session
	for name, why := range s.failed {
		out = append(out, Session{Peer: name, State: "Idle", Message: "not configured: " + why, BFD: paasv1.BFDNotConfigured})
	}
	s.mu.Unlock()
	if !started {
		return nil
	}
	err := srv.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
		addr := p.GetConf().GetNeighborAddress()
		name, ok := byAddr[addr]
		if !ok {
			return
		}
		conf := peers[name]
		sess := Session{Peer: name, Address: addr, State: stateNames[p.GetState().GetSessionState()],
			LocalASN: conf.MyASN, RouterID: routerID, Source: conf.Source}
		timers := p.GetTimers().GetState()
		if sess.State == Established {
			sess.Since = timers.GetUptime().AsTime()
			for _, af := range p.GetAfiSafis() {
				sess.PrefixesSent += int(af.GetState().GetAdvertised())
			}
		} else {
			if d := timers.GetDowntime(); d != nil && d.GetSeconds() > 0 {
				sess.Since = d.AsTime()
			}
			sess.Message = s.errors.last(addr)
			if sess.Message == "" {
				sess.Message = "no answer from the router yet"
			}
			if p.GetState().GetAdminState() == api.PeerState_ADMIN_STATE_PFX_CT {
				sess.OverPrefixLimit = true
				sess.Message = fmt.Sprintf("the router sent more than %d routes, and the node imports none: the node closed the session "+
					"and connects again every %s; configure the router to send this node no routes (FRR: an outbound route-map "+
					"that denies everything on this neighbor)", maxPrefixes, s.restartAfter())
			}
		}
		sess.BFD = paasv1.BFDNotConfigured
		if conf.BFD.Enabled() {
			b, known := s.bfd.session(addr)
			sess.BFD = paasv1.BFDDown
			if known {
				sess.BFD = b.state
			}
			sess.BFDMessage = bfdMessage(b, known, sess.State == Established, s.bfdErrors.last(addr), addr, time.Now())
		}
		out = append(out, sess)
	})
	if err != nil {
		s.log.Error(err, "list BGP sessions")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Peer < out[j].Peer })
	return out
}

// peerErrors keeps, per neighbour address, the last reason GoBGP gave for a
// session not coming up or going down, which its API does not report.
type peerErrors struct {
	mu   sync.Mutex
	byIP map[string]string
}

func newPeerErrors() *peerErrors { return &peerErrors{byIP: map[string]string{}} }

func (e *peerErrors) set(addr, msg string) {
	e.mu.Lock()
	e.byIP[addr] = msg
	e.mu.Unlock()
}

func (e *peerErrors) last(addr string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.byIP[addr]
}

func (e *peerErrors) forget(addr string) {
	e.mu.Lock()
	delete(e.byIP, addr)
	e.mu.Unlock()
}

// fields are the attributes of one of GoBGP's log records, by key.
type fields map[string]any

// reason turns one of GoBGP's peer log messages into a sentence for the
// BGPPeer's status, or "" for messages that say nothing about a failure.
func reason(msg string, f fields) string {
	switch msg {
	case "failed to connect":
		return fmt.Sprintf("cannot connect: %v (is the router up, reachable from the node, configured for this node's address, and with the same TCP MD5 password, if any?)", f["Error"])
	case "received notification":
		return fmt.Sprintf("the router closed the session: notification code %v subcode %v%s", f["Code"], f["Subcode"], communicated(f))
	case "sent notification":
		return fmt.Sprintf("this node closed the session: %v", f["Data"])
	case "hold timer expired":
		return "hold timer expired: the router went silent"
	case "Peer Down":
		return fmt.Sprintf("session down: %v", f["Reason"])
	}
	return ""
}

func communicated(f fields) string {
	if r, ok := f["Communicated-Reason"].(string); ok && r != "" {
		return " (" + r + ")"
	}
	return ""
}

// logHandler sends GoBGP's log (slog) to logr, its debug lines at V(2), and
// keeps the reasons of session failures, which GoBGP logs but does not
// report through its API.
type logHandler struct {
	log    logr.Logger
	errors *peerErrors
	attrs  []slog.Attr // from WithAttrs: GoBGP's per-peer loggers carry Topic and Key
}

// Enabled is true at debug too, so that connection failures, which GoBGP
// logs at that level only, reach Handle.
func (h *logHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *logHandler) Handle(_ context.Context, r slog.Record) error {
	f := fields{}
	for _, a := range h.attrs {
		f[a.Key] = a.Value.Any()
	}
	r.Attrs(func(a slog.Attr) bool {
		f[a.Key] = a.Value.Resolve().Any()
		return true
	})
	if f["Topic"] == "Peer" {
		if addr, _ := f["Key"].(string); addr != "" {
			if why := reason(r.Message, f); why != "" {
				h.errors.set(addr, why)
			}
		}
	}
	kv := make([]any, 0, 2*len(f))
	for k, v := range f {
		kv = append(kv, strings.ToLower(k), fmt.Sprint(v))
	}
	switch {
	case r.Level >= slog.LevelError:
		h.log.Error(nil, r.Message, kv...)
	case r.Level >= slog.LevelInfo:
		h.log.Info(r.Message, kv...)
	case h.log.V(2).Enabled():
		h.log.V(2).Info(r.Message, kv...)
	}
	return nil
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logHandler{log: h.log, errors: h.errors, attrs: append(slices.Clip(h.attrs), attrs...)}
}

// WithGroup flattens: GoBGP's keys are distinct without groups.
func (h *logHandler) WithGroup(string) slog.Handler { return h }
