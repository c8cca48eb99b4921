// Command steering is 'make bench-steering': what the steering tables
// (internal/steering) of 10,000 Services cost an agent to build, on 3 nodes
// and on 100 nodes. Every Service port has its own endpoints, spread over the
// nodes at random (1 to 3 per node, some nodes with none), so no two tables
// need be alike; a table is built from scratch for every Service, as after an
// agent's start or a periodic full sync.
//
// It prints, per size: the buckets given away (one data-plane element each,
// on a node that serves none of them), the tables' memory, and the rebuild
// time of all of them (best of -rounds), then the time of one table; and the
// rebuild time when every Service's endpoints are spread alike, as the agent
// builds them (through steering.Cache).
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/paas-org/vip-allocator-operator/internal/steering"
)

func main() {
	services := flag.Int("services", 10000, "Services (one port each)")
	buckets := flag.Int("buckets", steering.DefaultBuckets, "buckets per table")
	rounds := flag.Int("rounds", 3, "rebuilds of every table; the fastest is printed")
	flag.Parse()
	for _, nodes := range []int{3, 100} {
		run(*services, nodes, *buckets, *rounds)
	}
}

func run(services, nodes, buckets, rounds int) {
	r := rand.New(rand.NewPCG(uint64(nodes), 7))
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("node%03d", i)
	}
	inputs := make([][]steering.Node, services)
	for s := range inputs {
		for _, n := range names {
			// On 100 nodes a Service's endpoints sit on a few of them.
			if nodes > 3 && r.IntN(10) != 0 {
				continue
			}
			inputs[s] = append(inputs[s], steering.Node{Name: n, Weight: 1 + r.IntN(3)})
		}
	}
	var best time.Duration
	var tables []steering.Table
	for round := range max(rounds, 1) {
		tables = make([]steering.Table, 0, services)
		start := time.Now()
		for _, in := range inputs {
			tables = append(tables, steering.Build(in, buckets))
		}
		if d := time.Since(start); round == 0 || d < best {
			best = d
		}
	}
	bytes, away := 0, 0
	for _, t := range tables {
		bytes += t.Bytes()
		// The elements an entry node holds: every bucket not its own. names[0]
		// stands for any node.
		for b := range t.Buckets {
			if t.Owner(b) != names[0] {
				away++
			}
		}
	}
	fmt.Printf("steering-tables: %d Services x %d nodes, %d buckets: %d elements on a node, %.1f MiB of tables, rebuilt in %v (%v per table)\n",
		services, nodes, buckets, away, float64(bytes)/(1<<20), best.Round(time.Millisecond), (best / time.Duration(services)).Round(100*time.Nanosecond))
	// The same Services with their endpoints spread alike (one on each node, or on the same
	// ten nodes), through the agent's cache: one build serves them all.
	alike := inputs[0]
	var c steering.Cache
	start := time.Now()
	for range services {
		c.Build(alike, buckets)
	}
	fmt.Printf("steering-tables: %d Services x %d nodes spread alike, through steering.Cache: rebuilt in %v\n",
		services, nodes, time.Since(start).Round(100*time.Microsecond))
}
