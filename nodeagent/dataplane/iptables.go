package dataplane

import (
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-iptables/iptables"
)

// This file is the iptables plane: every chain whose name starts with "VIPA-" in tables nat
// and filter, and the jump rules into them from the built-in chains.
//
// Rules are rendered into one payload and written with a single iptables-restore --noflush per
// Sync, as kube-proxy does, missing jump rules included; go-iptables is used only for the few
// single-rule calls (finding and deleting jumps, the canary check).
//
// Costs that shaped the code (iptables 1.8.9, kernel 6.18, 10,000 Services): iptables-nft is
// quadratic in the number of chains a payload or a listing names (see plan.write, nftChains,
// listJumps), and the nft kernel revalidates the whole ruleset on any commit that adds a rule,
// so a partial Sync writes nothing it does not have to.

// jump is one rule from a built-in chain into ours, inserted at position 1 so that other
// components' rules (kube-proxy's KUBE-SERVICES) never see VIP traffic first.
type jump struct{ table, from, to string }

var jumps = []jump{
	{"nat", "PREROUTING", chainServices},
	{"nat", "OUTPUT", chainServices},
	{"nat", "POSTROUTING", chainPost},
	{"filter", "INPUT", chainFilter},
	{"filter", "FORWARD", chainFilter},
	{"filter", "OUTPUT", chainFilter},
}

// jumpSpec is what our jumps match on besides their target, spelled for iptables-restore.
const jumpSpec = `-m comment --comment "vip-allocator service VIPs"`

// matches reports whether a rule as iptables -S or iptables-save spell it is this jump,
// whatever else it matches on.
func (j jump) matches(rule string) bool {
	return strings.HasPrefix(rule, "-A "+j.from+" ") && strings.HasSuffix(rule, " -j "+j.to)
}

// IPTables owns every iptables rule and chain with the prefix "VIPA-" for one family.
type IPTables struct {
	cfg     Config
	backend string
	mark    uint32
	bins    binaries
	nft     string // the nft tool, to list chains fast on the nft backend; "" to use iptables-save
	ipt     *iptables.IPTables

	mu sync.Mutex
	// last is the state after the last successful Sync; nil forces a full Sync (at start and
	// after any failure, when iptables may hold anything).
	last *syncState
	// handoffs is what VIPA-HANDOFF holds (nil: unknown, rewrite it); handoffTouched
	// says whether this agent ever wrote it.
	handoffs       Handoffs
	handoffTouched bool
	// returnMarks is the payload VIPA-RETURN holds ("": unknown, rewrite it);
	// returnTouched says whether this agent ever wrote it (returnmark.go).
	returnMarks   string
	returnTouched bool
	// tookOver is set once the other plane's rules are gone (see Sync).
	tookOver bool
}

// NewIPTables checks the config, detects the iptables backend unless cfg.Backend names one, and finds
// the binaries. It changes nothing in iptables.
func NewIPTables(cfg Config) (*IPTables, error) {
	mark, err := checkConfig(&cfg)
	if err != nil {
		return nil, err
	}
	switch cfg.Backend {
	case "":
		cfg.Backend = detectBackend()
	case "nft", "legacy":
	default:
		return nil, fmt.Errorf("backend %q: %w", cfg.Backend, errBackend)
	}
	bins, err := lookBinaries(cfg.Family, cfg.Backend)
	if err != nil {
		return nil, err
	}
	proto := iptables.ProtocolIPv4
	if cfg.Family == IPv6 {
		proto = iptables.ProtocolIPv6
	}
	ipt, err := iptables.New(iptables.IPFamily(proto), iptables.Path(bins.cmd), iptables.Timeout(5))
	if err != nil {
		return nil, fmt.Errorf("go-iptables %s: %w", bins.cmd, err)
	}
	d := &IPTables{cfg: cfg, backend: cfg.Backend, mark: mark, bins: bins, ipt: ipt}
	if cfg.Backend == "nft" {
		d.nft, _ = exec.LookPath("nft")
	}
	return d, nil
}

// Backend reports the iptables backend in use: "nft" or "legacy".
func (d *IPTables) Backend() string { return d.backend }

// Family reports the IP family this Dataplane programs.
func (d *IPTables) Family() Family { return d.cfg.Family }

// Sync makes the rules match services, the complete desired set.
//
// With full=false it rewrites only the chains of Services whose rendering changed since the
// last successful Sync, deletes those of Services that went away, and rewrites VIPA-SERVICES
// and VIPA-FILTER only when their content changed; when nothing changed it runs no command.
// With full=true (forced on the first Sync and after a failure) it rewrites every chain,
// deletes every stale VIPA- chain found in iptables, and restores missing jump rules. A
// partial Sync trusts that the last one's jumps are still there: Healthy notices when not.
func (d *IPTables) Sync(services []Service, full bool) (SyncStats, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	start := time.Now()
	full = full || d.last == nil
	in := renderInput{
		Family:      d.cfg.Family,
		Mark:        d.mark,
		RandomFully: d.ipt.HasRandomFully(),
		Services:    services,
	}
	if full {
		// Drift repair: the next SetHandoffs and SetReturnMarks rewrite their chains too.
		d.handoffs, d.returnMarks = nil, ""
		f, err := d.inspect()
		if err != nil {
			d.last = nil
			return SyncStats{Full: true}, err
		}
		in.Existing = f.chains
		for _, j := range jumps {
			if !f.jumps[j] {
				in.MissingJumps = append(in.MissingJumps, j)
			}
		}
	} else {
		in.Last = d.last
	}
	p := makePlan(in)
	stats := SyncStats{Full: full}
	if filter, nat := p.writes(); !filter && !nat { // nothing changed
		d.last = p.state
		stats.Duration = time.Since(start)
		return stats, nil
	}
	// Until this Sync succeeds, iptables may hold a partial write: the next one must be full.
	d.last = nil
	err := restore(d.bins, func(w sink) { stats.Rules, stats.Chains = p.write(w) })
	if err != nil {
		stats.Duration = time.Since(start)
		return stats, fmt.Errorf("restore: %w", err)
	}
	d.last = p.state
	stats.Duration = time.Since(start)
	if !d.tookOver {
		// A node that ran the nftables plane before keeps its table until this plane serves.
		if err := CleanupNFTables(d.cfg.Family); err != nil {
			return stats, fmt.Errorf("remove the nftables plane's table: %w", err)
		}
		d.tookOver = true
	}
	return stats, nil
}

// inspect finds our chains and jumps, before a full Sync or a Cleanup.
func (d *IPTables) inspect() (found, error) {
	if d.nft == "" {
		f, err := scanSave(d.bins)
		if err != nil {
			return f, fmt.Errorf("read rules: %w", err)
		}
		return f, nil
	}
	chains, err := nftChains(d.nft, d.cfg.Family)
	if err != nil {
		return found{}, fmt.Errorf("list chains: %w", err)
	}
	present, err := d.listJumps(jumps, nil)
	return found{chains: chains, jumps: present}, err
}

// listJumps reports which jumps exist, calling del (when set) for every rule that is one.
// It lists the built-in chains (-S) rather than asking go-iptables' Exists (-C): for a rule
// that jumps to a user chain, iptables-nft -C loads every chain, 0.35 s at 10,000 Services.
func (d *IPTables) listJumps(js []jump, del func(j jump, rule string) error) (map[jump]bool, error) {
	present := map[jump]bool{}
	listed := map[[2]string][]string{}
	for _, j := range js {
		k := [2]string{j.table, j.from}
		rules, ok := listed[k]
		if !ok {
			var err error
			if rules, err = d.ipt.List(j.table, j.from); err != nil {
				return nil, fmt.Errorf("list %s/%s: %w", j.table, j.from, err)
			}
			listed[k] = rules
		}
		for _, r := range rules {
			if j.matches(r) {
				present[j] = true
				if del != nil {
					if err := del(j, r); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return present, nil
}

// Healthy reports false when the canary chain or a jump rule is gone (drift), or the last Sync
// failed: the caller then does a full Sync. It runs 8 iptables commands: ~25 ms at 10,000
// Services on nft, ~1 s on legacy (each legacy command reads the whole table), so call it on
// a timer rather than before every Sync.
func (d *IPTables) Healthy() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last == nil {
		return false
	}
	for _, table := range tables {
		// -C fails both when the rule and when the chain is missing.
		if ok, err := d.ipt.Exists(table, chainCanary, "-j", "RETURN"); err != nil || !ok {
			return false
		}
	}
	present, err := d.listJumps(jumps, nil)
	if err != nil {
		return false
	}
	for _, j := range jumps {
		if !present[j] {
			return false
		}
	}
	return d.returnMarksInPlace()
}

// Cleanup removes every jump rule and every VIPA- chain of this family, touching nothing else.
// It uses cfg's backend (detected when empty) and is safe to run when nothing is installed.
func Cleanup(cfg Config) error {
	return cleanupIPTables(cfg, false)
}

// cleanupIPTables is Cleanup, leaving the chains of the mangle table (mangleChains) when
// keepMangle: the nftables plane uses them, and removes the rest after taking over from this
// plane.
func cleanupIPTables(cfg Config, keepMangle bool) error {
	d, err := NewIPTables(cfg)
	if err != nil {
		return err
	}
	// Listing a table creates it with the nft backend: look first, so a node the
	// agent never touched (often its IPv6 side) is left exactly as it was.
	dump, err := run(d.bins.save)
	if err != nil {
		return err
	}
	if !bytes.Contains(dump, []byte(chainPrefix)) {
		return nil
	}
	// Jumps first: a chain still referenced cannot be deleted. Each is deleted by its own
	// spelling, so a jump someone else wrote to our chain goes too.
	// Only tables the dump shows: listing one the node lacks would create it (nft backend).
	candidates := slices.Clone(jumps)
	if !keepMangle {
		for _, c := range sortedMangleChains() {
			candidates = append(candidates, mangleChains[c]...)
		}
	}
	var ours []jump
	for _, j := range candidates {
		if bytes.Contains(dump, []byte("*"+j.table+"\n")) {
			ours = append(ours, j)
		}
	}
	_, err = d.listJumps(ours, func(j jump, rule string) error {
		if err := d.ipt.Delete(j.table, j.from, SplitRule(rule)[2:]...); err != nil {
			return fmt.Errorf("delete jump %s/%s: %w", j.table, j.from, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// One restore deletes them all (see deletePayload for the order); one call per chain
	// would take minutes at 10,000 Services.
	if payload := deletePayload(chainsInSave(dump)); payload != nil {
		if err := restore(d.bins, func(w sink) { w.Write(payload) }); err != nil {
			return fmt.Errorf("delete chains: %w", err)
		}
	}
	for _, c := range sortedMangleChains() {
		if !keepMangle && bytes.Contains(dump, []byte(":"+c+" ")) {
			if err := d.ipt.ClearAndDeleteChain("mangle", c); err != nil {
				return fmt.Errorf("delete %s: %w", c, err)
			}
		}
	}
	return nil
}

// chainsInSave lists our chains per table in an iptables-save dump.
func chainsInSave(dump []byte) map[string][]string {
	chains := map[string][]string{}
	table := ""
	for _, line := range strings.Split(string(dump), "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":"+chainPrefix):
			name, _, _ := strings.Cut(line[1:], " ")
			chains[table] = append(chains[table], name)
		}
	}
	return chains
}

// SplitRule splits a rule as iptables -S or iptables-save spells it into arguments,
// honouring double quotes (comments) and backslash escapes inside them.
func SplitRule(s string) []string {
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && inQuote && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case c == '"':
			inQuote, have = !inQuote, true
		case c == ' ' && !inQuote:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(c)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}
