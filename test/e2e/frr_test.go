//go:build root && envtest

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// frr is a real router: FRR's zebra, bgpd and maybe bfdd (Debian's frr package) running
// in one lab namespace with a temporary configuration, driven with vtysh.
type frr struct {
	l   *lab
	ns  string
	dir string
}

// startFRR starts zebra and bgpd in namespace ns with bgpd.conf holding bgpConf;
// both are killed when the test ends.
func startFRR(t testing.TB, l *lab, ns, bgpConf string) *frr {
	t.Helper()
	return startDaemons(t, l, ns, map[string]string{"bgpd": bgpConf})
}

// startFRRWithBFD is startFRR with bfdd too, bfdd.conf holding bfdConf.
func startFRRWithBFD(t testing.TB, l *lab, ns, bgpConf, bfdConf string) *frr {
	t.Helper()
	r := startDaemons(t, l, ns, map[string]string{"bgpd": bgpConf, "bfdd": bfdConf})
	testenv.Eventually(t, settle, "bfdd answers vtysh", func() error { _, err := r.vtysh("show bfd peers json"); return err })
	return r
}

// frrDaemons are the daemons the lab may run, in start order (zebra first:
// the others talk to it).
var frrDaemons = []string{"zebra", "bfdd", "bgpd"}

// startDaemons starts zebra and the daemons confs names (daemon → its
// configuration) in namespace ns; all are killed when the test ends.
func startDaemons(t testing.TB, l *lab, ns string, confs map[string]string) *frr {
	t.Helper()
	if _, err := os.Stat("/usr/lib/frr/bgpd"); err != nil {
		t.Fatal("FRR is missing: run 'make packages' (make test does) to install Debian's frr")
	}
	dir, err := os.MkdirTemp("", "vipa-frr-")
	if err != nil {
		t.Fatal(err)
	}
	r := &frr{l: l, ns: ns, dir: dir}
	t.Cleanup(r.stop)
	confs["zebra"] = "hostname router\n"
	for d, conf := range confs {
		if err := os.WriteFile(filepath.Join(dir, d+".conf"), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The daemons drop to the frr user, which must own the socket directory.
	l.run("chown", "-R", "frr:frr", dir)
	for _, d := range frrDaemons {
		if _, ok := confs[d]; !ok {
			continue
		}
		args := []string{"-d", "-u", "frr", "-g", "frr",
			"-f", filepath.Join(dir, d+".conf"), "-i", filepath.Join(dir, d+".pid"),
			"-z", filepath.Join(dir, "zserv.api"), "--vty_socket", dir, "--log", "file:" + filepath.Join(dir, d+".log")}
		if d == "bfdd" { // its control socket too, or two routers collide
			args = append(args, "--bfdctl", filepath.Join(dir, "bfdd.sock"))
		}
		l.in(ns, append([]string{"/usr/lib/frr/" + d}, args...)...)
	}
	testenv.Eventually(t, settle, "bgpd answers vtysh", func() error { _, err := r.vtysh("show bgp summary json"); return err })
	return r
}

func (r *frr) stop() {
	for _, d := range frrDaemons {
		if b, err := os.ReadFile(filepath.Join(r.dir, d+".pid")); err == nil {
			var pid int
			if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	time.Sleep(100 * time.Millisecond)
	_ = os.RemoveAll(r.dir)
}

// vtysh runs vtysh commands (each a -c) against this router.
func (r *frr) vtysh(cmds ...string) (string, error) {
	args := []string{"--vty_socket", r.dir}
	for _, c := range cmds {
		args = append(args, "-c", c)
	}
	out, err := exec.Command("vtysh", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("vtysh %s: %v: %s", strings.Join(cmds, "; "), err, out)
	}
	return string(out), nil
}

// bgpPath is one path of a prefix in bgpd's table, as 'show ip bgp json' gives it.
type bgpPath struct {
	Valid    bool `json:"valid"`
	LocPrf   int  `json:"locPrf"`
	Nexthops []struct {
		IP string `json:"ip"`
	} `json:"nexthops"`
	Community      *struct{ String string } `json:"community"`
	LargeCommunity *struct{ String string } `json:"largeCommunity"`
	ASPath         *struct{ String string } `json:"aspath"`
	// Multipath and Bestpath: the path is in the set bgpd installs (ECMP).
	Multipath bool                    `json:"multipath"`
	Bestpath  *struct{ Overall bool } `json:"bestpath"`
}

// installed reports whether bgpd forwards on p: its best path or one of its
// multipath set.
func (p bgpPath) installed() bool { return p.Multipath || p.Bestpath != nil && p.Bestpath.Overall }

// paths are the valid paths bgpd holds for prefix (IPv4 or IPv6).
func (r *frr) paths(prefix string) ([]bgpPath, error) {
	family := "ipv4"
	if strings.Contains(prefix, ":") {
		family = "ipv6"
	}
	out, err := r.vtysh("show bgp " + family + " unicast " + prefix + " json")
	if err != nil {
		return nil, err
	}
	var doc struct {
		Paths []bgpPath `json:"paths"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, fmt.Errorf("parse %q: %w", out, err)
	}
	var valid []bgpPath
	for _, p := range doc.Paths {
		if p.Valid {
			valid = append(valid, p)
		}
	}
	return valid, nil
}

// nextHops are the next hops of prefix in bgpd's table, sorted.
func (r *frr) nextHops(prefix string) ([]string, error) {
	paths, err := r.paths(prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range paths {
		for _, nh := range p.Nexthops {
			out = append(out, nh.IP)
		}
	}
	slices.Sort(out)
	return out, nil
}

// kernelNextHops are the next hops of the router's kernel route to vip (what
// forwarding uses: zebra installs bgpd's ECMP set), sorted.
func (r *frr) kernelNextHops(vip string) []string {
	family := "-4"
	if strings.Contains(vip, ":") {
		family = "-6"
	}
	out, err := exec.Command("ip", family, "-n", r.l.ns(r.ns), "route", "show", vip).CombinedOutput()
	if err != nil {
		return nil
	}
	var hops []string
	fields := strings.Fields(string(out))
	for i, f := range fields {
		if f == "via" && i+1 < len(fields) {
			hops = append(hops, fields[i+1])
		}
	}
	slices.Sort(hops)
	return hops
}
