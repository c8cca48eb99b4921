package steering

import (
	"fmt"
	"testing"
)

func BenchmarkBuild(b *testing.B) {
	for _, nodes := range []int{3, 100} {
		in := make([]Node, nodes)
		for i := range in {
			in[i] = Node{Name: fmt.Sprintf("node%d", i), Weight: 1 + i%3}
		}
		b.Run(fmt.Sprintf("nodes=%d/buckets=%d", nodes, DefaultBuckets), func(b *testing.B) {
			for b.Loop() {
				Build(in, DefaultBuckets)
			}
		})
	}
}
