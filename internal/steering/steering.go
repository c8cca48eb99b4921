// Package steering builds the consistent steering table of a Service port: a
// fixed number of buckets, each given to one serving node. A flow's hash
// picks a bucket, the bucket names the node that serves the flow. Any node a
// packet enters by looks the same table up, so a flow goes to the same
// serving node whichever node it enters by, and whichever node replaces that
// one.
//
// The table is a pure function of the set of (node, weight) pairs: every
// agent reads the same EndpointSlices, weighs each node by its ready
// endpoints of the Service port, and builds the same table, without talking
// to the others. Each bucket goes to the node with the highest weighted
// rendezvous (highest random weight) score for that bucket, so:
//
//   - a node's share of the buckets is in proportion to its weight;
//   - a node that leaves gives up only its own buckets, each to the node
//     that scored second there; a node that joins takes only the buckets it
//     now scores highest on. No other bucket moves, so no other flow moves
//     (a Maglev table moves a few others).
//
// Scores are computed in integers only (a fixed-point logarithm, products
// compared in 128 bits), so agents on different CPU architectures, whose
// floating-point logarithms may differ in the last bit, still build the
// same table. It does no I/O.
package steering

import (
	"cmp"
	"encoding/binary"
	"math/bits"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// DefaultBuckets is the number of buckets of a Service port's table: enough
// that three nodes' shares are within a few percent of their weights (with 64
// the three nodes node1-3 get 24, 25 and 15 buckets: one node a quarter less
// than its share), few enough that a table costs the data plane little (one
// element per bucket another node serves).
const DefaultBuckets = 256

// MaxBuckets bounds a table; a bucket index fits in 16 bits.
const MaxBuckets = 1 << 16

// Node is a serving candidate: a node name and its weight, the number of its
// ready endpoints for the Service port. A weight of zero or less takes no
// bucket.
type Node struct {
	Name   string
	Weight int
}

// Table gives each bucket to a node. Nodes are the nodes that may serve,
// sorted by name and without duplicates; Buckets[b] is an index into Nodes.
// A table without nodes has no buckets: nobody serves.
type Table struct {
	Nodes   []string
	Buckets []uint16
}

// Build returns the table of n buckets over nodes. Nodes with no weight are
// left out; a name given twice counts once, with the sum of its weights (an
// EndpointSlice split in two still names each endpoint once). The input's
// order does not matter. n below 1 means DefaultBuckets; it is capped at
// MaxBuckets.
func Build(nodes []Node, n int) Table {
	if n < 1 {
		n = DefaultBuckets
	}
	n = min(n, MaxBuckets)
	cands := merge(nodes)
	if len(cands) == 0 {
		return Table{}
	}
	t := Table{Nodes: make([]string, len(cands)), Buckets: make([]uint16, n)}
	// Nodes of one weight are compared by their hash alone (the score falls as
	// the hash does, the weight being the same), so a bucket costs one hash per
	// node and one logarithm per distinct weight, not per node.
	type group struct {
		weight uint64
		nodes  []int // indexes into cands, in name order
	}
	var groups []group
	seeds := make([]uint64, len(cands))
	for i, c := range cands {
		t.Nodes[i] = c.Name
		seeds[i] = xxhash.Sum64String(c.Name)
		j := slices.IndexFunc(groups, func(g group) bool { return g.weight == uint64(c.Weight) })
		if j < 0 {
			groups = append(groups, group{weight: uint64(c.Weight)})
			j = len(groups) - 1
		}
		groups[j].nodes = append(groups[j].nodes, i)
	}
	for b := range n {
		best, bestW, bestLen := -1, uint64(0), uint64(0)
		for _, g := range groups {
			top, topHash := -1, uint64(0)
			for _, i := range g.nodes {
				// The highest hash is the lowest -log2(u), the highest score; on a
				// tie the first name stays, the same on every node.
				if h := mix(seeds[i], uint64(b)); top < 0 || h > topHash {
					top, topHash = i, h
				}
			}
			l := negLog2(topHash)
			// A node's score is weight / l; it wins when weight * l_best >
			// weight_best * l. On a tie the node first by name wins.
			if best < 0 || greater(g.weight, bestLen, bestW, l) || (!greater(bestW, l, g.weight, bestLen) && top < best) {
				best, bestW, bestLen = top, g.weight, l
			}
		}
		t.Buckets[b] = uint16(best)
	}
	return t
}

// merge sorts the nodes with a weight by name and adds up the weights of a
// name given twice.
func merge(nodes []Node) []Node {
	out := make([]Node, 0, len(nodes))
	for _, n := range nodes {
		if n.Weight > 0 {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })
	kept := out[:0]
	for _, n := range out {
		if len(kept) > 0 && kept[len(kept)-1].Name == n.Name {
			kept[len(kept)-1].Weight += n.Weight
			continue
		}
		kept = append(kept, n)
	}
	return kept
}

// Owner is the node bucket b is given to ("" when nobody serves).
func (t Table) Owner(b int) string {
	if len(t.Nodes) == 0 || b < 0 || b >= len(t.Buckets) {
		return ""
	}
	return t.Nodes[t.Buckets[b]]
}

// Shares counts the buckets of each node.
func (t Table) Shares() map[string]int {
	out := make(map[string]int, len(t.Nodes))
	for _, i := range t.Buckets {
		out[t.Nodes[i]]++
	}
	return out
}

// Equal reports whether t and o give every bucket to the same node.
func (t Table) Equal(o Table) bool {
	if len(t.Buckets) != len(o.Buckets) {
		return false
	}
	for b := range t.Buckets {
		if t.Owner(b) != o.Owner(b) {
			return false
		}
	}
	return true
}

// Bytes is the memory the table's buckets take (the node names are shared
// with the caller's strings).
func (t Table) Bytes() int { return 2*len(t.Buckets) + 16*len(t.Nodes) }

// mix is the rendezvous hash of a node (its name's digest) and a bucket:
// SplitMix64's step and finalizer, which spread neighbouring buckets over the
// whole 64-bit range.
func mix(seed, bucket uint64) uint64 {
	z := seed + (bucket+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// fracBits is the precision of negLog2's result.
const fracBits = 32

// negLog2 is -log2(u) for u = h/2^64 (h taken as at least 1), in fixed point
// with fracBits fraction bits: always at least 1, at most 64<<fracBits. With
// h uniform, u is uniform on (0,1) and -ln(u)/weight is the exponential
// variable whose minimum over the nodes picks each node in proportion to its
// weight; log2 is ln times a constant, which orders the same.
//
// The integer part is the position of h's top bit; the fraction is log2 of
// the mantissa (in [1,2)), read from log2Table between its two nearest
// entries (within 2^-21 of the exact value: the weights' shares do not
// notice, and every node interpolates the same way).
func negLog2(h uint64) uint64 {
	h = max(h, 1)
	lz := bits.LeadingZeros64(h)
	whole := uint64(63 - lz) // floor(log2 h)
	m := h << lz             // the mantissa in [1,2), 63 fraction bits
	i := (m >> (63 - log2TableBits)) & (1<<log2TableBits - 1)
	f := (m >> (63 - log2TableBits - 32)) & (1<<32 - 1) // the rest, 32 bits
	lo, hi := log2Table[i], log2Table[i+1]
	frac := lo + (hi-lo)*f>>32
	// -log2(h/2^64) = 64 - log2(h) = 64 - whole - frac/2^fracBits.
	return max((64-whole)<<fracBits-frac, 1)
}

// log2TableBits is how many of the mantissa's top bits index log2Table.
const log2TableBits = 10

// log2Table[i] is log2(1 + i/2^log2TableBits) with fracBits fraction bits.
var log2Table = func() (t [1<<log2TableBits + 1]uint64) {
	for i := range t {
		t[i] = log2Mantissa(uint64(1<<log2TableBits+i) << (63 - log2TableBits)) // 2^64 overflows to 0
	}
	return t
}()

// log2Mantissa is log2(m/2^63) for m in [2^63, 2^64], with fracBits fraction
// bits: each bit comes from squaring the mantissa and seeing whether it
// reached 2. Integers only, so it is the same on every machine.
func log2Mantissa(m uint64) uint64 {
	if m == 0 { // 2^64, the table's last entry: log2(2) = 1
		return 1 << fracBits
	}
	var frac uint64
	for range fracBits {
		hi, lo := bits.Mul64(m, m) // m² with 126 fraction bits, in [1,4)
		frac <<= 1
		if hi >= 1<<63 { // m² ≥ 2: a one bit, and halve it
			frac |= 1
			m = hi
		} else {
			m = hi<<1 | lo>>63
		}
	}
	return frac
}

// greater reports whether wa/la > wb/lb, i.e. wa*lb > wb*la, exactly.
func greater(wa, lb, wb, la uint64) bool {
	ah, al := bits.Mul64(wa, lb)
	bh, bl := bits.Mul64(wb, la)
	return ah > bh || (ah == bh && al > bl)
}

// Cache remembers the tables it built, by their input: Services whose
// endpoints sit alike (three replicas, one per node) share one table, so a
// full rebuild of 10,000 of them costs a few builds. Its zero value is ready;
// it is not safe for concurrent use. It forgets everything once it holds
// maxCached tables, so it never outgrows the distinct inputs of one pass.
type Cache struct {
	tables map[string]Table
	key    []byte
}

// maxCached bounds a Cache.
const maxCached = 1 << 14

// Build is Build(nodes, n), from the cache when it was built before.
func (c *Cache) Build(nodes []Node, n int) Table {
	cands := merge(nodes)
	c.key = binary.AppendUvarint(c.key[:0], uint64(n))
	for _, nd := range cands {
		c.key = binary.AppendUvarint(c.key, uint64(nd.Weight))
		c.key = append(append(c.key, nd.Name...), 0)
	}
	if t, ok := c.tables[string(c.key)]; ok {
		return t
	}
	if c.tables == nil || len(c.tables) >= maxCached {
		c.tables = map[string]Table{}
	}
	t := Build(cands, n)
	c.tables[string(c.key)] = t
	return t
}
