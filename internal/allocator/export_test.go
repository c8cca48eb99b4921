package allocator

// InUse counts the held addresses that group g could hand out, of both families.
func (a *Allocator) InUse(g *Group) int {
	return a.inUseOf(g, IPv4) + a.inUseOf(g, IPv6)
}
