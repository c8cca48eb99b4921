package steering

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func nodes(spec ...any) []Node {
	var out []Node
	for i := 0; i+1 < len(spec); i += 2 {
		out = append(out, Node{Name: spec[i].(string), Weight: spec[i+1].(int)})
	}
	return out
}

// moved lists the buckets whose node differs between a and b.
func moved(a, b Table) []int {
	var out []int
	for i := range a.Buckets {
		if a.Owner(i) != b.Owner(i) {
			out = append(out, i)
		}
	}
	return out
}

func TestNodeSetChangesMoveOnlyTheirBuckets(t *testing.T) {
	const n = 1024
	for _, tc := range []struct {
		name          string
		before, after []Node
		// changed is the node that came or went, or whose weight changed.
		changed string
	}{
		{"a node leaves", nodes("a", 1, "b", 1, "c", 1), nodes("a", 1, "c", 1), "b"},
		{"a node joins", nodes("a", 1, "b", 1), nodes("a", 1, "b", 1, "c", 1), "c"},
		{"a weighted node leaves", nodes("a", 3, "b", 1, "c", 2, "d", 5), nodes("a", 3, "c", 2, "d", 5), "b"},
		{"a weighted node joins", nodes("a", 3, "b", 1, "c", 2), nodes("a", 3, "b", 1, "c", 2, "d", 7), "d"},
		{"a node loses its endpoints", nodes("a", 2, "b", 2, "c", 2), nodes("a", 2, "b", 0, "c", 2), "b"},
		{"one of 100 leaves", hundred(-1), hundred(42), "n42"},
		{"a node gains an endpoint", nodes("a", 1, "b", 1, "c", 1), nodes("a", 1, "b", 2, "c", 1), "b"},
		{"a node loses an endpoint", nodes("a", 2, "b", 2, "c", 2), nodes("a", 2, "b", 1, "c", 2), "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, after := Build(tc.before, n), Build(tc.after, n)
			m := moved(before, after)
			if len(m) == 0 {
				t.Fatalf("no bucket moved")
			}
			for _, b := range m {
				// Every moved bucket was the changed node's, or is now: nobody
				// else's flows move.
				if before.Owner(b) != tc.changed && after.Owner(b) != tc.changed {
					t.Errorf("bucket %d moved from %s to %s, neither is %s", b, before.Owner(b), after.Owner(b), tc.changed)
				}
			}
		})
	}
}

// hundred is nodes n0..n99 of weight 1, without n<skip>.
func hundred(skip int) []Node {
	var out []Node
	for i := range 100 {
		if i != skip {
			out = append(out, Node{Name: fmt.Sprintf("n%d", i), Weight: 1})
		}
	}
	return out
}

func TestLeavingNodeBucketsAllMoveAndJoiningNodeTakesOnlyWhatItWins(t *testing.T) {
	three := Build(nodes("a", 1, "b", 1, "c", 1), 256)
	two := Build(nodes("a", 1, "c", 1), 256)
	for b := range three.Buckets {
		switch {
		case three.Owner(b) == "b" && two.Owner(b) == "b":
			t.Fatalf("bucket %d still on the node that left", b)
		case three.Owner(b) != "b" && two.Owner(b) != three.Owner(b):
			t.Fatalf("bucket %d of %s moved to %s when b left", b, three.Owner(b), two.Owner(b))
		}
	}
	// b joining again takes back exactly its buckets.
	if !Build(nodes("c", 1, "a", 1, "b", 1), 256).Equal(three) {
		t.Fatal("the table after b rejoined differs from the one before it left")
	}
}

func TestSharesFollowWeights(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []Node
		n     int
		tol   float64 // allowed difference from the exact share, as a fraction of all buckets
	}{
		{"three equal, default buckets", nodes("node1", 1, "node2", 1, "node3", 1), DefaultBuckets, 0.10},
		{"three equal", nodes("node1", 1, "node2", 1, "node3", 1), 4096, 0.02},
		{"weights 1:2:3", nodes("x", 1, "y", 2, "z", 3), 4096, 0.02},
		{"weights 10:1", nodes("big", 10, "small", 1), 4096, 0.02},
		{"100 nodes", hundred(-1), 16384, 0.004},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := Build(tc.nodes, tc.n)
			total := 0
			for _, nd := range tc.nodes {
				total += nd.Weight
			}
			shares := tab.Shares()
			for _, nd := range tc.nodes {
				want := float64(nd.Weight) / float64(total)
				got := float64(shares[nd.Name]) / float64(tc.n)
				if math.Abs(got-want) > tc.tol {
					t.Errorf("%s: share %.4f, want %.4f ± %.4f", nd.Name, got, want, tc.tol)
				}
			}
		})
	}
}

func TestDeterministicWhateverTheOrder(t *testing.T) {
	in := nodes("node3", 2, "node1", 1, "node2", 4, "node4", 1)
	want := Build(in, 512)
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		shuffled := append([]Node(nil), in...)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := Build(shuffled, 512); !got.Equal(want) {
			t.Fatalf("order %v gives another table", shuffled)
		}
	}
	// A node named twice (two EndpointSlices) counts with its summed weight.
	split := nodes("node3", 1, "node1", 1, "node2", 4, "node4", 1, "node3", 1)
	if !Build(split, 512).Equal(want) {
		t.Fatal("a node named twice gives another table than its summed weight")
	}
}

// The table every node builds must not change between releases or
// architectures: these owners are pinned. A change here means agents of two
// versions send a flow to two serving nodes during a rolling upgrade.
func TestPinnedOwners(t *testing.T) {
	tab := Build(nodes("node1", 1, "node2", 1, "node3", 1), 16)
	got := ""
	for b := range tab.Buckets {
		got += tab.Owner(b)[4:]
	}
	if want := pinned; got != want {
		t.Fatalf("owners of buckets 0-15: %s, pinned %s", got, want)
	}
}

func TestEmptyAndEdgeCases(t *testing.T) {
	if tab := Build(nil, 64); len(tab.Buckets) != 0 || tab.Owner(0) != "" {
		t.Fatalf("no nodes: %+v", tab)
	}
	if tab := Build(nodes("a", 0, "b", -1), 64); len(tab.Buckets) != 0 {
		t.Fatalf("no weight: %+v", tab)
	}
	if tab := Build(nodes("a", 1), 0); len(tab.Buckets) != DefaultBuckets || tab.Shares()["a"] != DefaultBuckets {
		t.Fatalf("one node, default size: %+v", tab)
	}
	if tab := Build(nodes("a", 1), MaxBuckets+5); len(tab.Buckets) != MaxBuckets {
		t.Fatalf("size not capped: %d", len(tab.Buckets))
	}
}

func TestNegLog2(t *testing.T) {
	for _, h := range []uint64{1, 2, 3, 1 << 32, 1<<63 - 1, 1 << 63, 3 << 62, math.MaxUint64} {
		got := float64(negLog2(h)) / (1 << fracBits)
		want := 64 - math.Log2(float64(h))
		if math.Abs(got-want) > 1e-8 && !(h == math.MaxUint64 && got > 0) {
			t.Errorf("negLog2(%#x) = %v, want %v", h, got, want)
		}
		if negLog2(h) < 1 {
			t.Errorf("negLog2(%#x) = 0", h)
		}
	}
}

const pinned = "1111222122332223"

func TestCacheBuildsWhatBuildDoes(t *testing.T) {
	var c Cache
	for _, in := range [][]Node{
		nodes("a", 1, "b", 1, "c", 1),
		nodes("c", 1, "a", 1, "b", 1), // the same input in another order: the same table
		nodes("a", 1, "b", 2, "c", 1),
		nodes("a", 1, "b", 1), // b
		nodes("ab", 1),        // names must not run together in the key
	} {
		if got, want := c.Build(in, 128), Build(in, 128); !got.Equal(want) || len(got.Nodes) != len(want.Nodes) {
			t.Errorf("cache gives another table for %v", in)
		}
	}
	if len(c.tables) != 4 {
		t.Errorf("%d tables cached, want 4 (one input given twice)", len(c.tables))
	}
}
