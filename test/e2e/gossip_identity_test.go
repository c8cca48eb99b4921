//go:build root && envtest

package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent/membership"
)

// TestGossipImpostorCannotHoldAVIP: a compromised node (its agent's gossip
// key in hand) runs a second gossip member named after the VIP's owner and
// advertising the owner's address, refuting every suspicion of "it" from its
// own address. When the owner's agent is SIGKILLed, the VIP still moves to a
// live node within the failover bound and stays there.
func TestGossipImpostorCannotHoldAVIP(t *testing.T) {
	d, _, vip, owner := announcedLab(t)
	var secret corev1.Secret
	if err := d.env.Admin.Get(context.Background(), client.ObjectKey{Namespace: paasv1.DefaultNamespace, Name: paasv1.MemberlistSecret}, &secret); err != nil {
		t.Fatal(err)
	}
	var host string
	for _, n := range []string{"node1", "node2", "node3"} {
		if n != owner {
			host = n
			break
		}
	}
	joined := startImpostor(t, d.lab, host, impostorSpec{
		key:       secret.Data[paasv1.MemberlistKey],
		name:      owner + "/impostor",
		bind:      netip.AddrPortFrom(netip.MustParseAddr(lanIP[host]), membership.DefaultPort+1),
		advertise: netip.AddrPortFrom(netip.MustParseAddr(lanIP[owner]), membership.DefaultPort),
		join:      netip.AddrPortFrom(netip.MustParseAddr(lanIP[host]), membership.DefaultPort),
	})
	t.Logf("impostor %s/impostor on %s: %s", owner, host, joined)
	time.Sleep(2 * time.Second) // it gossips and refutes for a while
	if got := d.owner(t, vip, ""); got != owner {
		t.Fatalf("the impostor moved %s from %s to %s", vip, owner, got)
	}

	start := time.Now()
	_ = d.agents[owner].Process.Kill()
	_ = d.agents[owner].Wait()
	delete(d.agents, owner)
	took := d.untilAnnouncedElsewhere(t, vip, owner, start)
	to := d.owner(t, vip, owner)
	t.Logf("killed %s's agent with the impostor refuting for it: %s taken over by %s after %s", owner, vip, to, took)
	// The package's 2 s, plus the ledger's write through a shared API server.
	if took > 3*time.Second {
		t.Errorf("%s moved after %s, want within 3 s", vip, took)
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if n := d.announcer(vip); n == owner {
			t.Fatalf("%s back on the dead %s", vip, owner)
		}
	}
	if _, err := d.curl("http://" + vip + "/"); err != nil {
		t.Fatal(err)
	}
}

const impostorEnv = "VIPA_GOSSIP_IMPOSTOR"

// impostorSpec is the impostor's member: its name, the address it binds
// (its own node's) and the one it advertises (the victim's).
type impostorSpec struct {
	key                   []byte
	name                  string
	bind, advertise, join netip.AddrPort
}

// startImpostor runs the impostor in host's namespace (this test binary,
// re-run; see TestMain), killed when the test ends, and returns its first
// report (whom it joined).
func startImpostor(t testing.TB, l *lab, host string, s impostorSpec) string {
	c := exec.Command("ip", "netns", "exec", l.ns(host), os.Args[0])
	c.Env = append(os.Environ(), impostorEnv+"="+strings.Join([]string{
		base64.StdEncoding.EncodeToString(s.key), s.name, s.bind.String(), s.advertise.String(), s.join.String()}, " "))
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		t.Fatalf("impostor: no report")
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	if r := lines.Text(); !strings.HasPrefix(r, "joined") {
		t.Fatalf("impostor: %s", r)
	}
	return lines.Text()
}

// runImpostor is a plain memberlist member with the key that pulls the
// others' state every 50 ms, so it hears of a suspicion of itself at once
// and refutes it; it runs until killed.
func runImpostor() {
	f := strings.Fields(os.Getenv(impostorEnv))
	fail := func(err error) {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	key, err := base64.StdEncoding.DecodeString(f[0])
	if err != nil {
		fail(err)
	}
	bind, advertise := netip.MustParseAddrPort(f[2]), netip.MustParseAddrPort(f[3])
	cfg := memberlist.DefaultLANConfig()
	cfg.Name = f[1]
	cfg.BindAddr, cfg.BindPort = bind.Addr().String(), int(bind.Port())
	cfg.AdvertiseAddr, cfg.AdvertisePort = advertise.Addr().String(), int(advertise.Port())
	tt := membership.TunedTimers()
	cfg.ProbeInterval, cfg.ProbeTimeout, cfg.SuspicionMult = tt.ProbeInterval, tt.ProbeTimeout, tt.SuspicionMult
	cfg.GossipInterval, cfg.GossipNodes, cfg.RetransmitMult = tt.GossipInterval, tt.GossipNodes, tt.RetransmitMult
	cfg.PushPullInterval = 50 * time.Millisecond
	cfg.EnableCompression = false
	cfg.LogOutput = io.Discard
	if cfg.Keyring, err = memberlist.NewKeyring(nil, key); err != nil {
		fail(err)
	}
	m, err := memberlist.Create(cfg)
	if err != nil {
		fail(err)
	}
	n, err := m.Join([]string{f[4]})
	if err != nil {
		fail(err)
	}
	fmt.Printf("joined %d, knows %d members\n", n, m.NumMembers())
	select {}
}
