package netnstest

import (
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// EnterTest is Enter for a test: it fails the test without root (make test runs as root, and a
// skipped test would hide that it never ran) and deletes the namespace when the test ends,
// failed or not. The caller then builds its network with Run, Veth and the like.
func EnterTest(t testing.TB, prefix string) (name string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root to create network namespaces (make test runs as root)")
	}
	name, leave, err := Enter(prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := leave(); err != nil {
			t.Error(err)
		}
	})
	return name
}

// AddPeer creates the network namespace prefix-<random> beside the test's, for the other end
// of a link, and deletes it when the test ends. The calling thread stays where it is: commands
// reach the peer through RunIn, Go code through Do.
func AddPeer(t testing.TB, prefix string) (name string) {
	t.Helper()
	name = randomName(prefix)
	Run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	return name
}

// randomName keeps two runs on one machine, or a crashed run's leftovers, out of each other's way.
func randomName(prefix string) string {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return prefix + "-" + hex.EncodeToString(rnd[:])
}

// Run runs a command in the calling thread's namespace, fails the test if it fails and returns
// its output.
func Run(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// RunIn is Run inside the namespace ns; "" is the calling thread's.
func RunIn(t testing.TB, ns string, args ...string) string {
	t.Helper()
	if ns == "" {
		return Run(t, args...)
	}
	return Run(t, append([]string{"ip", "netns", "exec", ns}, args...)...)
}

// NoDAD turns duplicate address detection off in ns ("" for the calling thread's) for the links
// created after it: IPv6 addresses are usable at once, no tentative state to wait for, and NDP
// sockets can bind the link-local address as soon as it appears.
func NoDAD(t testing.TB, ns string) {
	t.Helper()
	RunIn(t, ns, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
}

// Veth links dev in the calling thread's namespace to peerDev in peerNS ("" for the same
// namespace) and sets both ends up. A veth pair rather than a dummy link: a test kernel may lack
// the dummy driver, and a pair carries traffic to a peer namespace.
func Veth(t testing.TB, dev, peerNS, peerDev string) {
	t.Helper()
	args := []string{"ip", "link", "add", dev, "type", "veth", "peer", "name", peerDev}
	if peerNS != "" {
		args = append(args, "netns", peerNS)
	}
	Run(t, args...)
	RunIn(t, peerNS, "ip", "link", "set", peerDev, "up")
	Run(t, "ip", "link", "set", dev, "up")
}

// LinkLocal waits up to 10 s for dev in ns ("" for the calling thread's) to have its IPv6
// link-local address, which the kernel adds once the link has carrier, and returns it. The
// address counts once it is no longer tentative: even with NoDAD the kernel lists it as
// tentative for a moment, and a socket cannot bind it then.
func LinkLocal(t testing.TB, ns, dev string) netip.Addr {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		for _, f := range strings.Fields(RunIn(t, ns, "ip", "-6", "-o", "addr", "show", "dev", dev, "scope", "link", "-tentative")) {
			if p, err := netip.ParsePrefix(f); err == nil {
				return p.Addr()
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no link-local address on %s", dev)
		}
	}
}
