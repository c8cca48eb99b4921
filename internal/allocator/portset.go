package allocator

// portSet holds ports for the collision check of shared addresses: one bit
// per port number and protocol, so building it and asking it are O(ports)
// whatever the other side holds. Numbers outside 0-65535 (the API refuses
// them, but the allocator takes what it is given) go to a map.
type portSet struct {
	bits  map[string]*[65536 / 64]uint64
	other map[Port]struct{}
}

func newPortSet(ports []Port) *portSet {
	s := &portSet{bits: map[string]*[65536 / 64]uint64{}}
	for _, p := range ports {
		s.add(p)
	}
	return s
}

func (s *portSet) add(p Port) {
	if p.Port < 0 || p.Port > 65535 {
		if s.other == nil {
			s.other = map[Port]struct{}{}
		}
		s.other[p] = struct{}{}
		return
	}
	b := s.bits[p.Protocol]
	if b == nil {
		b = new([65536 / 64]uint64)
		s.bits[p.Protocol] = b
	}
	b[p.Port/64] |= 1 << (p.Port % 64)
}

func (s *portSet) has(p Port) bool {
	if p.Port < 0 || p.Port > 65535 {
		_, ok := s.other[p]
		return ok
	}
	b := s.bits[p.Protocol]
	return b != nil && b[p.Port/64]&(1<<(p.Port%64)) != 0
}

// firstIn returns the first of ports that s holds.
func (s *portSet) firstIn(ports []Port) (Port, bool) {
	for _, p := range ports {
		if s.has(p) {
			return p, true
		}
	}
	return Port{}, false
}
