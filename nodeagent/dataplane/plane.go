package dataplane

import (
	"errors"
	"fmt"
	"os/exec"
)

// Plane is what the agent needs of a data plane for one family, whichever writes the rules:
// the native nftables plane (NFTables) or the iptables-restore one (IPTables).
type Plane interface {
	Family() Family
	// Backend names what writes the rules: "nftables", or the iptables backend ("nft", "legacy").
	Backend() string
	// Sync makes the rules match services, the complete desired set; full rewrites everything
	// (drift repair), otherwise only what changed since the last successful Sync is written.
	Sync(services []Service, full bool) (SyncStats, error)
	// Healthy reports false when the rules changed behind the plane's back or the last Sync
	// failed: the caller then does a full Sync.
	Healthy() bool
	// SetHandoffs makes mid-stream TCP of the VIPs in h go to their previous owner (handoff.go).
	SetHandoffs(h Handoffs) error
	// SetReturnMarks marks the connections to VIPs by the interface they arrive on, so that
	// policy routing sends their replies back that way (returnmark.go).
	SetReturnMarks(marks []ReturnMark) error
}

// ChangeSyncer is a Plane whose partial Sync can be told which Services (by
// "namespace/name") may differ from its last successful Sync: it compares only those, so a
// change costs the plane the work of the Services it touched, not of all of them. services is
// still the complete desired set; a Service missing from it is gone, named or not. After a
// failed Sync the plane rewrites everything whatever it is told.
type ChangeSyncer interface {
	SyncChanged(services []Service, changed map[string]bool) (SyncStats, error)
}

// The values of Config.Plane.
const (
	PlaneAuto     = "auto"     // nftables when the kernel takes our ruleset, else iptables
	PlaneNFTables = "nftables" // the native nftables plane, or an error
	PlaneIPTables = "iptables" // the iptables-restore plane
)

// Open returns the plane cfg.Plane asks for. With PlaneAuto (or empty) it probes nftables
// (see probeNFTables) and falls back to iptables, returning why in fallback.
func Open(cfg Config) (p Plane, fallback error, err error) {
	switch cfg.Plane {
	case PlaneNFTables:
		n, err := NewNFTables(cfg)
		return n, nil, err
	case PlaneIPTables:
		i, err := NewIPTables(cfg)
		return i, nil, err
	case "", PlaneAuto:
		n, nerr := NewNFTables(cfg)
		if nerr == nil {
			return n, nil, nil
		}
		i, err := NewIPTables(cfg)
		if err != nil {
			return nil, nil, errors.Join(nerr, err)
		}
		return i, nerr, nil
	}
	return nil, nil, fmt.Errorf("data plane %q: must be %q, %q or %q", cfg.Plane, PlaneAuto, PlaneNFTables, PlaneIPTables)
}

// checkConfig checks the family and the masquerade bit (defaulting it) and returns the mark;
// both planes start with it, so they refuse and default the same settings.
func checkConfig(cfg *Config) (mark uint32, err error) {
	if cfg.Family != IPv4 && cfg.Family != IPv6 {
		return 0, fmt.Errorf("family %q: must be %q or %q", cfg.Family, IPv4, IPv6)
	}
	if cfg.MasqueradeBit == 0 {
		cfg.MasqueradeBit = 21
	}
	switch cfg.MasqueradeBit {
	case 14, 15:
		return 0, fmt.Errorf("masquerade bit %d: kube-proxy uses bits 14 and 15, pick another", cfg.MasqueradeBit)
	}
	if cfg.MasqueradeBit < 0 || cfg.MasqueradeBit > 31 {
		return 0, fmt.Errorf("masquerade bit %d: must be within 0-31", cfg.MasqueradeBit)
	}
	return 1 << cfg.MasqueradeBit, nil
}

// CleanupAll removes everything either plane wrote for this family (our nftables table, our
// iptables chains and jumps) and touches nothing else. A node without the iptables tools
// can hold no iptables rules of ours, so their absence is not an error.
func CleanupAll(cfg Config) error {
	var errs []error
	if err := CleanupNFTables(cfg.Family); err != nil {
		errs = append(errs, fmt.Errorf("nftables: %w", err))
	}
	if err := CleanupSteering(cfg.Family); err != nil {
		errs = append(errs, fmt.Errorf("steering routes: %w", err))
	}
	if err := Cleanup(cfg); err != nil && !errors.Is(err, exec.ErrNotFound) {
		errs = append(errs, fmt.Errorf("iptables: %w", err))
	}
	return errors.Join(errs...)
}
