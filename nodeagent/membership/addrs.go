package membership

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// DefaultPort is memberlist's usual port, used when Config.Port or a join
// address gives none.
const DefaultPort = 7946

// joinAddr turns "host:port", "host", "[v6]:port" or a bare IPv6 address
// into "host:port" with the default port filled in.
func joinAddr(addr string, defaultPort int) (string, error) {
	if addr == "" {
		return "", fmt.Errorf("empty address")
	}
	bare := strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]")
	if ip, err := netip.ParseAddr(bare); err == nil { // a bare IPv4 or IPv6 address
		return netip.AddrPortFrom(ip, uint16(defaultPort)).String(), nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil { // a host name without a port
		return net.JoinHostPort(addr, strconv.Itoa(defaultPort)), nil
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("address %q: port must be a number from 1 to 65535", addr)
	}
	if host == "" {
		return "", fmt.Errorf("address %q has no host", addr)
	}
	return net.JoinHostPort(host, port), nil
}
