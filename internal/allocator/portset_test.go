package allocator

import "testing"

func TestPortSet(t *testing.T) {
	ports := []Port{{"TCP", 0}, {"TCP", 63}, {"TCP", 64}, {"TCP", 65535}, {"UDP", 53}, {"TCP", -1}, {"TCP", 70000}}
	s := newPortSet(ports)
	for _, tc := range []struct {
		p    Port
		want bool
	}{
		{Port{"TCP", 0}, true}, {Port{"TCP", 63}, true}, {Port{"TCP", 64}, true}, {Port{"TCP", 65535}, true},
		{Port{"TCP", 1}, false}, {Port{"TCP", 65534}, false}, {Port{"UDP", 53}, true}, {Port{"SCTP", 53}, false},
		{Port{"TCP", 53}, false}, {Port{"TCP", -1}, true}, {Port{"TCP", 70000}, true}, {Port{"UDP", 70000}, false},
		{Port{"TCP", 70000 - 65536}, false},
	} {
		if got := s.has(tc.p); got != tc.want {
			t.Errorf("has(%s) = %v, want %v", tc.p, got, tc.want)
		}
	}
	// Both ways of comparing: a short list is scanned, a long one meets the set.
	long := append(portRange("SCTP", 1, scanBelow), Port{"UDP", 53})
	if p, ok := newPortSet(ports).firstIn(long); !ok || p != (Port{"UDP", 53}) {
		t.Errorf("firstIn long: %s, %v", p, ok)
	}
	if _, ok := newPortSet(ports).firstIn(long[:scanBelow]); ok {
		t.Errorf("firstIn long: a collision without one")
	}
	if p, ok := newPortSet(ports).firstIn([]Port{{"UDP", 54}, {"TCP", 65535}, {"UDP", 53}}); !ok || p != (Port{"TCP", 65535}) {
		t.Errorf("firstIn: %s, %v", p, ok)
	}
}
