package bgp

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	api "github.com/osrg/gobgp/v3/api"
	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
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
}

// Established is the RFC 4271 name of an up session.
const Established = "Established"

var stateNames = map[api.PeerState_SessionState]string{
	api.PeerState_UNKNOWN:     "Idle",
	api.PeerState_IDLE:        "Idle",
	api.PeerState_CONNECT:     "Connect",
	api.PeerState_ACTIVE:      "Active",
	api.PeerState_OPENSENT:    "OpenSent",
	api.PeerState_OPENCONFIRM: "OpenConfirm",
	api.PeerState_ESTABLISHED: Established,
}

// Sessions reports every configured peer's session, sorted by peer name.
func (s *Speaker) Sessions(ctx context.Context) []Session {
	s.mu.Lock()
	byAddr := map[string]string{}
	for name, p := range s.peers {
		byAddr[p.Address.String()] = name
	}
	started := s.started
	s.mu.Unlock()
	if !started {
		return nil
	}
	var out []Session
	err := s.server.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
		addr := p.GetConf().GetNeighborAddress()
		name, ok := byAddr[addr]
		if !ok {
			return
		}
		sess := Session{Peer: name, Address: addr, State: stateNames[p.GetState().GetSessionState()]}
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

// reason turns one of GoBGP's peer log messages into a sentence for the
// BGPPeer's status, or "" for messages that say nothing about a failure.
func reason(msg string, f gobgplog.Fields) string {
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

func communicated(f gobgplog.Fields) string {
	if r, ok := f["Communicated-Reason"].(string); ok && r != "" {
		return " (" + r + ")"
	}
	return ""
}

// logAdapter sends GoBGP's log to logr (its debug lines at V(2)) and keeps
// the reasons of session failures.
type logAdapter struct {
	log    logr.Logger
	errors *peerErrors
}

func (l *logAdapter) note(msg string, f gobgplog.Fields) {
	if f["Topic"] != "Peer" {
		return
	}
	addr, _ := f["Key"].(string)
	if r := reason(msg, f); r != "" && addr != "" {
		l.errors.set(addr, r)
	}
}

func (l *logAdapter) keyvals(f gobgplog.Fields) []any {
	kv := make([]any, 0, 2*len(f))
	for k, v := range f {
		kv = append(kv, strings.ToLower(k), fmt.Sprint(v))
	}
	return kv
}

func (l *logAdapter) Panic(msg string, f gobgplog.Fields) {
	l.log.Error(nil, msg, l.keyvals(f)...)
	panic(msg)
}
func (l *logAdapter) Fatal(msg string, f gobgplog.Fields) { l.log.Error(nil, msg, l.keyvals(f)...) }
func (l *logAdapter) Error(msg string, f gobgplog.Fields) {
	l.note(msg, f)
	l.log.Error(nil, msg, l.keyvals(f)...)
}
func (l *logAdapter) Warn(msg string, f gobgplog.Fields) {
	l.note(msg, f)
	l.log.Info(msg, l.keyvals(f)...)
}
func (l *logAdapter) Info(msg string, f gobgplog.Fields) {
	l.note(msg, f)
	l.log.Info(msg, l.keyvals(f)...)
}
func (l *logAdapter) Debug(msg string, f gobgplog.Fields) {
	l.note(msg, f)
	if l.log.V(2).Enabled() {
		l.log.V(2).Info(msg, l.keyvals(f)...)
	}
}

// GetLevel is debug so that connection failures, which GoBGP logs at that
// level only, reach note.
func (l *logAdapter) GetLevel() gobgplog.LogLevel { return gobgplog.DebugLevel }
func (l *logAdapter) SetLevel(gobgplog.LogLevel)  {}
