package membership

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/memberlist"
)

// State is what a member tells the others about itself.
type State string

const (
	// Active members may own VIPs.
	Active State = "Active"
	// Draining members are handing their VIPs over before they stop.
	Draining State = "Draining"
	// Restarting members stop and come back soon (an agent restart or
	// upgrade): the others keep counting their node alive for RestartGrace
	// after they go, so a restart moves no VIP.
	Restarting State = "Restarting"
)

// DefaultRestartGrace is how long a node whose agent left Restarting still
// counts as alive, waiting for its next agent.
const DefaultRestartGrace = 20 * time.Second

// Config describes this member.
type Config struct {
	// NodeName is the Kubernetes node name, used as the member name.
	NodeName string
	// BindAddr is the node's own address; memberlist binds UDP and TCP there
	// and tells the others to reach us there.
	BindAddr netip.Addr
	// Port defaults to DefaultPort (7946).
	Port int
	// Keys (16, 24 or 32 bytes each, AES-128/192/256-GCM) authenticate and
	// encrypt every message: the first (the primary) encrypts what this
	// member sends, any of them decrypts what it receives; packets that
	// decrypt with none are dropped. SetKeys changes them (rotation).
	Keys [][]byte
	// Admit decides whether another member counts: node is the node name it
	// declares, addr the address it advertises (which the transport holds it
	// to: see the package doc). A member refused is not counted alive (nil
	// admits every member holding a key).
	Admit func(node string, addr netip.Addr) error
	// Timers default field by field to TunedTimers.
	Timers Timers
	// RestartGrace defaults to DefaultRestartGrace.
	RestartGrace time.Duration
	// Log receives memberlist's own log (errors at V(0), warnings at V(1),
	// info at V(2), debug at V(4)).
	Log logr.Logger
}

// Cluster is this node's view of the live agents.
type Cluster struct {
	list    *memberlist.Memberlist
	port    int
	timers  Timers
	log     logr.Logger
	changed chan struct{}
	// name is this member's name: the node name and an instance id, so a
	// restarted agent is a new member and never inherits the state (say
	// Draining) its predecessor left behind under a higher incarnation.
	name string

	mu      sync.Mutex
	self    State
	members map[string]State // alive members by member name, self included
	stopped bool
	// restarting maps the nodes whose agent left Restarting to when their
	// grace ends.
	restarting map[string]time.Time
	grace      time.Duration

	keyring  *memberlist.Keyring
	admit    func(node string, addr netip.Addr) error
	rejected atomic.Uint64
}

// maxJoinsInFlight bounds concurrent joins: a join to a powered-off node
// waits for TCPTimeout, so joins run side by side rather than one by one.
const maxJoinsInFlight = 16

// Start binds the member's sockets and starts probing. The member knows
// only itself until Join.
func Start(cfg Config) (*Cluster, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("start membership: %w", err)
	}
	port := cfg.Port
	if port == 0 {
		port = DefaultPort
	}
	keyring, err := memberlist.NewKeyring(cfg.Keys[1:], cfg.Keys[0])
	if err != nil {
		return nil, fmt.Errorf("start membership: keyring: %w", err)
	}
	var instance [4]byte
	if _, err := rand.Read(instance[:]); err != nil {
		return nil, fmt.Errorf("start membership: instance id: %w", err)
	}
	c := &Cluster{
		name:       cfg.NodeName + "/" + hex.EncodeToString(instance[:]),
		port:       port,
		timers:     cfg.Timers.withDefaults(),
		log:        cfg.Log,
		changed:    make(chan struct{}, 1),
		self:       Active,
		members:    map[string]State{},
		restarting: map[string]time.Time{},
		grace:      cfg.RestartGrace,
		keyring:    keyring,
		admit:      cfg.Admit,
	}
	if c.grace <= 0 {
		c.grace = DefaultRestartGrace
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = c.name
	mc.BindAddr = cfg.BindAddr.String()
	mc.BindPort = port
	mc.AdvertiseAddr = cfg.BindAddr.String()
	mc.AdvertisePort = port
	mc.Keyring = keyring
	// Both default to true already; spelled out because they are what keeps
	// a member without the key from joining or injecting state.
	mc.GossipVerifyIncoming = true
	mc.GossipVerifyOutgoing = true
	// memberlist compresses every packet with a fresh LZW writer (a 64 KiB
	// table per packet): on a LAN that buys nothing and costs most of the
	// CPU when changes are gossiped.
	mc.EnableCompression = false
	c.timers.applyTo(mc)
	mc.Delegate = delegate{c}
	mc.Events = delegate{c}
	mc.Alive = delegate{c}
	mc.Logger = log.New(logWriter{cfg.Log}, "", 0)
	at := netip.AddrPortFrom(cfg.BindAddr, uint16(port))
	sockets, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{cfg.BindAddr.String()}, BindPort: port, Logger: mc.Logger})
	if err != nil {
		// memberlist formats its listeners' errors with %v: the errno
		// survives as its text only.
		if strings.Contains(err.Error(), syscall.EADDRINUSE.Error()) {
			return nil, fmt.Errorf("start membership on %s: %w: %w", at, ErrPortInUse, err)
		}
		return nil, fmt.Errorf("start membership on %s: %w", at, err)
	}
	transport := newSourceBound(sockets, c.name, cfg.BindAddr.Unmap(), keyring, &c.rejected, cfg.Log)
	transport.admit = cfg.Admit
	mc.Transport = transport
	list, err := memberlist.Create(mc)
	if err != nil {
		_ = transport.Shutdown()
		return nil, fmt.Errorf("start membership on %s: %w", at, err)
	}
	transport.list.Store(list)
	c.list = list
	return c, nil
}

// ErrPortInUse is Start's error when another process holds the port, UDP or
// TCP, on the bind address.
var ErrPortInUse = errors.New("port in use")

func (cfg Config) validate() error {
	switch {
	case cfg.NodeName == "":
		return errors.New("NodeName is empty: set it to the Kubernetes node name")
	case !cfg.BindAddr.IsValid() || cfg.BindAddr.IsUnspecified():
		return fmt.Errorf("BindAddr %q: set it to the node's own address", cfg.BindAddr)
	case cfg.Port < 0 || cfg.Port > 65535:
		return fmt.Errorf("Port %d is outside 1-65535", cfg.Port)
	}
	return validKeys(cfg.Keys)
}

func validKeys(keys [][]byte) error {
	if len(keys) == 0 {
		return errors.New("no key: give at least one")
	}
	for i, k := range keys {
		if n := len(k); n != 16 && n != 24 && n != 32 {
			return fmt.Errorf("key %d has %d bytes: it must have 16, 24 or 32", i+1, n)
		}
	}
	return nil
}

// Join contacts the given members ("host:port", or "host" for the default
// port) and merges their view; addresses that do not answer are skipped.
// It returns how many answered, and an error only when none did.
func (c *Cluster) Join(addrs []string) (int, error) {
	var (
		mu       sync.Mutex
		joined   int
		failures []error
		wg       sync.WaitGroup
		slots    = make(chan struct{}, maxJoinsInFlight)
	)
	for _, a := range addrs {
		hostPort, err := joinAddr(a, c.port)
		if err != nil {
			failures = append(failures, fmt.Errorf("join %s: %w", a, err))
			continue
		}
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			n, err := c.list.Join([]string{hostPort})
			mu.Lock()
			defer mu.Unlock()
			joined += n
			if err != nil {
				failures = append(failures, fmt.Errorf("join %s: %w", hostPort, err))
			}
		}()
	}
	wg.Wait()
	for _, err := range failures {
		c.log.V(1).Info("member did not answer", "error", err.Error())
	}
	if joined == 0 && len(addrs) > 0 {
		return 0, fmt.Errorf("join: none of %d addresses answered: %w", len(addrs), errors.Join(failures...))
	}
	return joined, nil
}

// Members returns the nodes with an alive member, self included, and their
// states. A member under suspicion is still alive: it has a few probe rounds
// to refute before the others declare it dead. While an agent restarts, its
// node has two members for a moment: the node is Active if either is.
func (c *Cluster) Members() map[string]State {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]State, len(c.members))
	for member, s := range c.members {
		node := nodeOf(member)
		if s == Restarting {
			s = Active // still carrying its VIPs until it goes
		}
		if s == Active || out[node] == "" {
			out[node] = s
		}
	}
	now := time.Now()
	for node, until := range c.restarting {
		if _, back := out[node]; back || !now.Before(until) {
			delete(c.restarting, node)
			continue
		}
		out[node] = Active
	}
	return out
}

// nodeOf is the node name of a member name ("<node>/<instance>"); node names
// never hold a '/'.
func nodeOf(member string) string {
	if i := strings.LastIndexByte(member, '/'); i >= 0 {
		return member[:i]
	}
	return member
}

// Changed is signalled (coalesced: one pending signal at most) whenever a
// member joins, dies, leaves or changes its state. Read Members after it.
func (c *Cluster) Changed() <-chan struct{} { return c.changed }

// SetState tells every member our new state. It returns once the update
// has been gossiped at least once (or with an error after about a second:
// the update stays queued and goes out anyway).
func (c *Cluster) SetState(s State) error {
	if s != Active && s != Draining && s != Restarting {
		return fmt.Errorf("set state %q: want %q, %q or %q", s, Active, Draining, Restarting)
	}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return fmt.Errorf("set state %s: membership stopped", s)
	}
	c.self = s
	if _, in := c.members[c.name]; in {
		c.members[c.name] = s
	}
	c.mu.Unlock()
	c.notify()
	if err := c.list.UpdateNode(c.broadcastTimeout()); err != nil {
		return fmt.Errorf("set state %s: %w", s, err)
	}
	return nil
}

// broadcastTimeout is how long SetState and Leave wait for their message
// to go out: many gossip rounds, and never less than a second.
func (c *Cluster) broadcastTimeout() time.Duration {
	return max(time.Second, 20*c.timers.GossipInterval)
}

// Leave tells the others we are going (they drop us at once instead of
// suspecting us first), then stops. timeout bounds the wait for the leave
// message to go out; zero means a default of about a second.
func (c *Cluster) Leave(timeout time.Duration) error {
	if !c.markStopped() {
		return nil
	}
	if timeout <= 0 {
		timeout = c.broadcastTimeout()
	}
	leaveErr := c.list.Leave(timeout)
	if leaveErr != nil {
		leaveErr = fmt.Errorf("leave: %w", leaveErr)
	}
	if err := c.list.Shutdown(); err != nil {
		return errors.Join(leaveErr, fmt.Errorf("leave: shutdown: %w", err))
	}
	return leaveErr
}

// Shutdown stops without telling anyone: to the others it looks like a
// crash, and they declare us dead after the suspicion timeout.
func (c *Cluster) Shutdown() error {
	if !c.markStopped() {
		return nil
	}
	if err := c.list.Shutdown(); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// markStopped reports whether this call is the one that stops the member.
func (c *Cluster) markStopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return false
	}
	c.stopped = true
	return true
}

func (c *Cluster) notify() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// stateFromMeta decodes a member's node metadata; members that announce
// nothing are Active.
func stateFromMeta(meta []byte) State {
	if len(meta) == 0 {
		return Active
	}
	return State(meta)
}

// delegate is memberlist's hook into the Cluster. memberlist calls the
// event methods with its node lock held, so they only touch our own map.
type delegate struct{ c *Cluster }

func (d delegate) NodeMeta(limit int) []byte {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	meta := []byte(d.c.self)
	if len(meta) > limit {
		return nil
	}
	return meta
}

func (d delegate) NotifyJoin(n *memberlist.Node)   { d.c.setMember(n, true) }
func (d delegate) NotifyUpdate(n *memberlist.Node) { d.c.setMember(n, true) }
func (d delegate) NotifyLeave(n *memberlist.Node)  { d.c.setMember(n, false) }

func (c *Cluster) setMember(n *memberlist.Node, alive bool) {
	c.mu.Lock()
	old, had := c.members[n.Name]
	switch {
	case n.Name == c.name:
		// Our own state is ours: never what someone gossips about us.
		c.members[n.Name] = c.self
	case alive:
		c.members[n.Name] = stateFromMeta(n.Meta)
	default:
		delete(c.members, n.Name)
		if had && old == Restarting {
			c.restarting[nodeOf(n.Name)] = time.Now().Add(c.grace)
			time.AfterFunc(c.grace, c.notify) // the grace ending changes Members
		}
	}
	now, has := c.members[n.Name]
	c.mu.Unlock()
	if had != has || old != now {
		c.log.V(1).Info("member changed", "member", n.Name, "address", memberAddr(n), "alive", has, "state", now)
		c.notify()
	}
}

func memberAddr(n *memberlist.Node) string {
	a, _ := netip.AddrFromSlice(n.Addr)
	return netip.AddrPortFrom(a.Unmap(), n.Port).String()
}

// Unused parts of memberlist.Delegate: membership state is all we gossip.
func (delegate) NotifyMsg([]byte)                {}
func (delegate) GetBroadcasts(int, int) [][]byte { return nil }
func (delegate) LocalState(bool) []byte          { return nil }
func (delegate) MergeRemoteState([]byte, bool)   {}
