package explain

import (
	"time"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// Report is the answer for one subject.
type Report struct {
	// Subject is what was asked about: "Service default/web", "IP 192.0.2.7", ...
	Subject string `json:"subject"`
	// Allocation is step 1, for a Service (or the holder of an address).
	Allocation *Allocation `json:"allocation,omitempty"`
	// VIPs are steps 2 to 5 for each address of the subject.
	VIPs []VIP `json:"vips,omitempty"`
	// Problems are what kept explain from seeing everything (an agent that
	// did not answer); each makes the affected step ✗ too.
	Problems []string `json:"problems,omitempty"`
	// WhatIfDrain is the election run again without one node.
	WhatIfDrain *Drain `json:"whatIfDrain,omitempty"`
}

// Check is one step's verdict.
type Check struct {
	OK bool `json:"ok"`
	// Reason says what was found, and, when not OK, what to do.
	Reason string `json:"reason"`
}

// Allocation is step 1: where the Service's addresses come from.
type Allocation struct {
	Check
	Service   string   `json:"service"`
	Addresses []string `json:"addresses,omitempty"`
	// Groups say for every IPGroup whether it admits the Service, and why not.
	Groups []GroupVerdict `json:"groups,omitempty"`
}

// GroupVerdict is one IPGroup's answer to a Service.
type GroupVerdict struct {
	Name     string `json:"name"`
	Admitted bool   `json:"admitted"`
	Reason   string `json:"reason,omitempty"`
}

// VIP is steps 2 to 5 for one address.
type VIP struct {
	Address      string       `json:"address"`
	Group        string       `json:"group,omitempty"`
	Mode         string       `json:"mode,omitempty"`
	Ledger       Ledger       `json:"ledger"`
	Election     Election     `json:"election"`
	DataPath     DataPath     `json:"dataPath"`
	Announcement Announcement `json:"announcement"`
	History      History      `json:"history"`
}

// Ledger is the address's IP object.
type Ledger struct {
	Check
	Object     string   `json:"object,omitempty"`
	Holders    []string `json:"holders,omitempty"`
	SharingKey string   `json:"sharingKey,omitempty"`
}

// Election is step 2: which nodes may carry the address, and which does.
type Election struct {
	Check
	// Owner answers for an L2 address, on Interface.
	Owner     string `json:"owner,omitempty"`
	Interface string `json:"interface,omitempty"`
	// Advertisers advertise a BGP address.
	Advertisers []string `json:"advertisers,omitempty"`
	// Nodes are every node that runs an agent, each chosen or why not.
	Nodes []Candidate `json:"nodes,omitempty"`
}

// Candidate is one node in an election.
type Candidate struct {
	Node   string `json:"node"`
	Chosen bool   `json:"chosen"`
	// Eligible nodes could carry the address; an L2 address goes to one.
	Eligible bool   `json:"eligible"`
	Reason   string `json:"reason,omitempty"`
}

// DataPath is step 3: what each node's kernel holds for the address.
type DataPath struct {
	Check
	Nodes []NodePath `json:"nodes,omitempty"`
}

// NodePath is one node's kernel state for the address.
type NodePath struct {
	Check
	Node  string     `json:"node"`
	Ports []PortPath `json:"ports,omitempty"`
}

// PortPath is one Service port: what the kernel DNATs to against the
// Service's ready endpoints that node should use.
type PortPath struct {
	Port   string   `json:"port"`
	Kernel []string `json:"kernel"`
	Want   []string `json:"want"`
}

// Announcement is step 4: who tells the network about the address.
type Announcement struct {
	Check
	AnnouncedBy []string `json:"announcedBy,omitempty"`
	// Answering are the nodes whose agents say they answer ARP/NDP for it.
	Answering []string `json:"answering,omitempty"`
	// LastGratuitous is when the owner last sent a gratuitous ARP (IPv6:
	// unsolicited Neighbor Advertisement) for it.
	LastGratuitous *time.Time `json:"lastGratuitous,omitempty"`
	Conflict       string     `json:"conflict,omitempty"`
	// Sessions are the BGP sessions of the advertisers.
	Sessions []Session `json:"sessions,omitempty"`
}

// Session is one node's BGP session with one peer.
type Session struct {
	Peer  string `json:"peer"`
	Node  string `json:"node"`
	State string `json:"state"`
	BFD   string `json:"bfd,omitempty"`
	// Sent says whether the address's route is in the session's
	// Adj-RIB-Out, as the node's agent read it (nil: its agent did not say).
	Sent *bool `json:"sent,omitempty"`
}

// History is step 5: the address's last ownership changes.
type History struct {
	Check
	Entries []paasv1.Failover `json:"entries,omitempty"`
}

// Drain is the election without one node: where its addresses would go.
type Drain struct {
	Node  string `json:"node"`
	Moves []Move `json:"moves"`
}

// Move is one address a drain moves (To empty: no node could carry it).
type Move struct {
	Address string   `json:"address"`
	From    []string `json:"from"`
	To      []string `json:"to"`
}
