package v1

import "strings"

// DescribeParts names the group's parts as the spec writes them, for
// messages: "segment 192.0.2.0/24, addresses 198.51.100.10-198.51.100.20".
func (s *IPGroupSpec) DescribeParts() string {
	var parts []string
	if s.Segment != "" {
		parts = append(parts, "segment "+s.Segment)
	}
	if len(s.Addresses) > 0 {
		parts = append(parts, "addresses "+strings.Join(s.Addresses, ", "))
	}
	return strings.Join(parts, ", ")
}
