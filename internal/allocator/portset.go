package allocator

// portSet answers whether ports collide with a fixed list, in time linear in
// the ports whatever the list holds: the collision check of a shared address
// runs under the allocator's one lock. Small comparisons (the common case: a
// few ports a side) scan the list, which costs less than building the set;
// larger ones build a bit per port number and protocol on first use. Numbers
// outside 0-65535 (the API refuses them, but the allocator takes what it is
// given) go to a map.
type portSet struct {
	ports []Port
	bits  map[string]*[65536 / 64]uint64
	other map[Port]struct{}
}

// scanBelow is the largest product of both sides' lengths compared by
// scanning; past it, the set is built.
const scanBelow = 256

func newPortSet(ports []Port) *portSet { return &portSet{ports: ports} }

// firstIn returns the first of ports that s holds.
func (s *portSet) firstIn(ports []Port) (Port, bool) {
	has := s.has
	if s.bits == nil && len(s.ports)*len(ports) <= scanBelow {
		has = s.scanHas
	}
	for _, p := range ports {
		if has(p) {
			return p, true
		}
	}
	return Port{}, false
}

func (s *portSet) scanHas(p Port) bool {
	for _, q := range s.ports {
		if q == p {
			return true
		}
	}
	return false
}

func (s *portSet) has(p Port) bool {
	if s.bits == nil {
		s.build()
	}
	if p.Port < 0 || p.Port > 65535 {
		_, ok := s.other[p]
		return ok
	}
	b := s.bits[p.Protocol]
	return b != nil && b[p.Port/64]&(1<<(p.Port%64)) != 0
}

func (s *portSet) build() {
	s.bits = map[string]*[65536 / 64]uint64{}
	for _, p := range s.ports {
		if p.Port < 0 || p.Port > 65535 {
			if s.other == nil {
				s.other = map[Port]struct{}{}
			}
			s.other[p] = struct{}{}
			continue
		}
		b := s.bits[p.Protocol]
		if b == nil {
			b = new([65536 / 64]uint64)
			s.bits[p.Protocol] = b
		}
		b[p.Port/64] |= 1 << (p.Port % 64)
	}
}
