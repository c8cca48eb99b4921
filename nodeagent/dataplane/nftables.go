package dataplane

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// NFTables is the native nftables plane of one family: the table "vip-allocator" (family ip
// or ip6, see nftables_ruleset.go) written through netlink, every Service port and endpoint
// an element of its sets and maps. A partial Sync is one transaction adding and deleting the
// elements of the Services that changed; a full one fills a new generation of every set and
// switches every rule to it in one transaction (nftables_write.go), so traffic never sees
// the table half written and any drift is gone.
//
// Connection handoffs stay in iptables (VIPA-HANDOFF in mangle, iptables_handoff.go): TEE has
// been proven there, and our reject-vips chain lets its untracked copies out.
type NFTables struct {
	cfg    Config
	layout *nftLayout

	mu sync.Mutex
	// gen is the set generation the rules use ("a" or "b", see writeFull); "" until a full
	// Sync succeeded.
	gen string
	// last is the state after the last successful Sync; nil forces a full Sync (at start and
	// after any failure, when the table may hold anything).
	last *nftState
	// handoff writes VIPA-HANDOFF; nil when iptables is missing, with the reason in handoffErr.
	handoff    *IPTables
	handoffErr error
	// tookOver is set once the other plane's rules are gone (see Sync).
	tookOver bool
	// steer is who serves steered flows (steering.go); nil: nothing is steered.
	steer *steerView
}

// NewNFTables checks the config and that the kernel takes this plane's whole ruleset (see
// probeNFTables). It changes nothing.
func NewNFTables(cfg Config) (*NFTables, error) {
	mark, err := checkConfig(&cfg)
	if err != nil {
		return nil, err
	}
	n := &NFTables{cfg: cfg, layout: newNFTLayout(cfg.Family, nftTableName, mark)}
	if err := probeNFTables(newNFTLayout(cfg.Family, nftTableName+"-probe", mark)); err != nil {
		return nil, fmt.Errorf("nftables %s: %w", cfg.Family, err)
	}
	n.handoff, n.handoffErr = NewIPTables(cfg)
	return n, nil
}

// Backend reports "nftables".
func (n *NFTables) Backend() string { return PlaneNFTables }

// Family reports the IP family this plane programs.
func (n *NFTables) Family() Family { return n.cfg.Family }

// nftConn opens a netlink connection per Sync or listing (in the caller's network namespace).
// The buffers are raised as nft does: a transaction is up to ~300 KB of messages, and the
// kernel answers every one of them.
func nftConn() (*nftables.Conn, error) {
	return nftables.New(nftables.WithSockOptions(func(c *netlink.Conn) error {
		raw, err := c.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = errors.Join(
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 64<<20),
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20))
		}); err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("netlink buffers: %w", serr)
		}
		return nil
	}))
}

// Sync makes the table match services, the complete desired set (see Plane).
func (n *NFTables) Sync(services []Service, full bool) (SyncStats, error) {
	return n.sync(services, full, nil)
}

// SyncChanged is a partial Sync told which Services may have changed (see ChangeSyncer).
func (n *NFTables) SyncChanged(services []Service, changed map[string]bool) (SyncStats, error) {
	return n.sync(services, false, changed)
}

func (n *NFTables) sync(services []Service, full bool, changed map[string]bool) (SyncStats, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	start := time.Now()
	last, reuse := n.last, (*nftState)(nil)
	if full {
		last, reuse = nil, n.last
	}
	var p *nftPlan
	if changed != nil && !full {
		p = planNFTablesChanged(n.cfg.Family, services, last, changed, n.steer)
	}
	if p == nil {
		p = planNFTablesReusing(n.cfg.Family, services, last, reuse, changed, n.steer)
	}
	stats := SyncStats{Full: p.full, Elements: p.fullCount + len(p.add) + len(p.del)}
	if !p.full && stats.Elements == 0 {
		n.last = p.state
		stats.Duration = time.Since(start)
		return stats, nil
	}
	// The plan updated the last state in place, and until this Sync succeeds the table may
	// hold anything: the next Sync must be full.
	n.last = nil
	var err error
	if p.full {
		stats.Rules, stats.Chains, err = n.writeFull(p.state)
		if n.handoff != nil {
			n.handoff.forgetMangle() // drift repair covers VIPA-HANDOFF and VIPA-RETURN too
		}
	} else {
		stats.Rules, err = n.writeChanges(p)
	}
	stats.Duration = time.Since(start)
	if err != nil {
		return stats, fmt.Errorf("nftables %s Sync (%d elements): %w", map[bool]string{true: "full", false: "partial"}[p.full], stats.Elements, err)
	}
	n.last = p.state
	if !n.tookOver {
		// A node that ran the iptables plane before keeps its chains until this plane serves;
		// the handoff chain stays, this plane uses it.
		if err := cleanupIPTables(n.cfg, true); err != nil && !errors.Is(err, exec.ErrNotFound) {
			return stats, fmt.Errorf("remove the iptables plane's chains: %w", err)
		}
		n.tookOver = true
	}
	return stats, nil
}

// nftBatch queues one transaction's messages and keeps the first error of queueing one
// (google/nftables reports most marshalling errors at Flush, a few at once).
type nftBatch struct {
	*nftables.Conn
	err error
}

func (b *nftBatch) check(err error) {
	if b.err == nil {
		b.err = err
	}
}

// flush sends the transaction, unless queueing it (or an earlier one) failed.
func (b *nftBatch) flush() error {
	if b.err == nil {
		b.err = b.Flush()
	}
	return b.err
}

// Healthy reports false when our table, a chain or a rule is gone (someone deleted or
// flushed them) or the last Sync failed. Elements are not compared (that would list them
// all); the periodic full Sync rewrites them.
func (n *NFTables) Healthy() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.last == nil {
		return false
	}
	c, err := nftConn()
	if err != nil {
		return false
	}
	if ok, err := tableExists(c, n.layout.table); err != nil || !ok {
		return false
	}
	if n.handoff != nil && !n.handoff.mangleInPlace() {
		return false
	}
	for chain, want := range n.layout.ruleCounts(len(n.last.maps), len(n.last.affinity)) {
		rules, err := c.GetRules(n.layout.table, &nftables.Chain{Name: chain, Table: n.layout.table})
		if err != nil || len(rules) != want {
			return false
		}
	}
	return true
}

// SetHandoffs writes the connection handoffs into iptables (see NFTables).
func (n *NFTables) SetHandoffs(h Handoffs) error {
	if n.handoff == nil {
		if len(h) == 0 {
			return nil
		}
		return fmt.Errorf("connection handoff needs iptables: %w", n.handoffErr)
	}
	return n.handoff.SetHandoffs(h)
}

func tableExists(c *nftables.Conn, t *nftables.Table) (bool, error) {
	tables, err := c.ListTablesOfFamily(t.Family)
	if err != nil {
		return false, fmt.Errorf("list tables: %w", err)
	}
	return slices.ContainsFunc(tables, func(x *nftables.Table) bool { return x.Name == t.Name }), nil
}

// probeNFTables sends the plane's whole ruleset (one endpoint map) under another table name
// and deletes that table in the same transaction: the kernel checks every expression (and
// loads its modules) and commits nothing. A kernel without nf_tables, NAT, numgen,
// concatenated interval sets or dynamic maps fails here, and the agent falls back to iptables.
func probeNFTables(l *nftLayout) error {
	conn, err := nftConn()
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	c := &nftBatch{Conn: conn}
	c.AddTable(l.table)
	sets := l.declareSets(c, map[int]bool{1: true}, map[uint32]bool{1: true})
	l.queueRules(c, sets, map[int]bool{1: true}, map[uint32]bool{1: true})
	c.DelTable(l.table)
	if err := c.flush(); err != nil {
		if errors.Is(err, syscall.EPROTONOSUPPORT) || errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("kernel support missing: %w", err)
		}
		return fmt.Errorf("probe transaction: %w", err)
	}
	return nil
}

// CleanupNFTables deletes our table of family fam, if there is one.
func CleanupNFTables(fam Family) error {
	c, err := nftConn()
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	t := newNFTLayout(fam, nftTableName, 0).table
	ok, err := tableExists(c, t)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPROTONOSUPPORT) {
		return nil // a kernel without nf_tables holds no table of ours
	}
	if err != nil || !ok {
		return err
	}
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("delete table %s: %w", t.Name, err)
	}
	return nil
}
