//go:build root

package install

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestImageRootFS builds the image's root filesystem with the script the
// Dockerfile runs, and runs it read-only in a chroot inside a fresh network namespace:
// both iptables backends with the matches and targets the agent writes, the
// agent's cleanup, and the operator as the non-root user.
func TestImageRootFS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("chroot and network namespaces need root (make test runs as root)")
	}
	root := t.TempDir()
	script := filepath.Join(testenv.RepoRoot(), "hack", "image-rootfs.sh")
	if out, err := exec.Command(script, root).CombinedOutput(); err != nil {
		t.Fatalf("image-rootfs.sh: %v\n%s", err, out)
	}
	buildStatic(t, filepath.Join(root, "usr", "local", "bin", "vip-allocator"))
	for _, absent := range []string{"bin/sh", "usr/bin/apt-get", "usr/bin/bash"} {
		if _, err := os.Stat(filepath.Join(root, absent)); err == nil {
			t.Errorf("%s must not be in the image", absent)
		}
	}
	// One shell on the host side: a private mount namespace gets the root
	// read-only with the host's /dev and the xtables lock file mounted on it, as
	// the agent's DaemonSet runs it (readOnlyRootFilesystem, the lock a hostPath),
	// and a fresh network namespace the rules.
	steps := []string{
		"mkdir -p " + root + "/run && touch " + root + "/run/xtables.lock",
		"mount --bind " + root + " " + root,
		"mount -o remount,bind,ro " + root,
		"if touch " + root + "/written 2>/dev/null; then echo 'the root is writable'; exit 1; fi",
		"mount --bind /dev " + root + "/dev",
		"lock=$(mktemp) && mount --bind $lock " + root + "/run/xtables.lock",
		"chroot " + root + " /usr/sbin/iptables-nft -t nat -N VIPA-SERVICES",
		"chroot " + root + " /usr/sbin/iptables-nft -t nat -A VIPA-SERVICES -d 192.0.2.1/32 -p tcp --dport 80 -m comment --comment default/web:http -j DNAT --to-destination 198.51.100.2:8080",
		"chroot " + root + " /usr/sbin/iptables-nft -t nat -A POSTROUTING -m mark --mark 0x200000/0x200000 -j MASQUERADE",
		"chroot " + root + " /usr/sbin/ip6tables-legacy -t nat -A PREROUTING -d 2001:db8::1/128 -p udp --dport 53 -j DNAT --to-destination [2001:db8:1::2]:5353",
		"chroot " + root + " /usr/sbin/iptables-nft-save -t nat",
		"chroot " + root + " /usr/local/bin/vip-allocator agent cleanup",
		"echo after-cleanup",
		"chroot " + root + " /usr/sbin/iptables-nft-save -t nat",
		"chroot --userspec=65532:65532 " + root + " /usr/local/bin/vip-allocator help",
	}
	out, err := exec.Command("unshare", "--net", "--mount", "--propagation", "private", "sh", "-ec", strings.Join(steps, "\n")).CombinedOutput()
	if err != nil {
		t.Fatalf("in the image's root filesystem: %v\n%s", err, out)
	}
	before, after, _ := strings.Cut(string(out), "after-cleanup")
	if !strings.Contains(before, `--comment "default/web:http" -j DNAT --to-destination 198.51.100.2:8080`) {
		t.Fatalf("iptables-nft did not load its modules:\n%s", before)
	}
	if strings.Contains(after, "VIPA-") {
		t.Fatalf("agent cleanup in the image left its chain:\n%s", after)
	}
	if !strings.Contains(after, "Run the node agent") {
		t.Fatalf("the operator's usage as the non-root user is missing:\n%s", after)
	}
}
