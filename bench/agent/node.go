package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paas-org/vip-allocator-operator/internal/netnstest"
	"github.com/paas-org/vip-allocator-operator/internal/procmem"
)

// node is one node's network namespace, with the API server reachable on its loopback (a
// forwarder to the root namespace's) and the process that programs it.
type node struct {
	name, ns string
	ip       netip.Addr
	ln       net.Listener
	proc     *exec.Cmd
	log      string
}

// newNode makes namespace vipa-bench-<random>-<name>, its loopback up and an interface
// holding the node's address (the agent's liveness gossip binds to it; a veth pair inside the namespace,
// since not every kernel has the dummy driver), and forwards
// 127.0.0.1:6443 inside it to api.
func newNode(name string, ip netip.Addr, api string) (*node, error) {
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	n := &node{name: name, ns: "vipa-bench-" + hex.EncodeToString(rnd[:]) + "-" + name, ip: ip}
	for _, args := range [][]string{
		{"ip", "netns", "add", n.ns},
		{"ip", "-n", n.ns, "link", "set", "lo", "up"},
		{"ip", "-n", n.ns, "link", "add", "node0", "type", "veth", "peer", "name", "node0p"},
		{"ip", "-n", n.ns, "link", "set", "node0p", "up"},
		{"ip", "-n", n.ns, "addr", "add", ip.String() + "/128", "dev", "node0", "nodad"},
		{"ip", "-n", n.ns, "link", "set", "node0", "up"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			n.destroy()
			return nil, fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	err := netnstest.Do(n.ns, func() (err error) {
		n.ln, err = net.Listen("tcp", "127.0.0.1:6443")
		return err
	})
	if err != nil {
		n.destroy()
		return nil, fmt.Errorf("listen in %s: %w", n.ns, err)
	}
	go forward(n.ln, api)
	return n, nil
}

// forward copies every connection accepted on ln to target (dialled from the root namespace).
func forward(ln net.Listener, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			up, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer up.Close()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			_, _ = io.Copy(c, up)
		}()
	}
}

// start runs args inside the namespace ('ip netns exec' execs it: the pid is the program's),
// logging to dir/<name>.log.
func (n *node) start(dir string, args ...string) error {
	n.log = filepath.Join(dir, n.name+".log")
	log, err := os.Create(n.log)
	if err != nil {
		return err
	}
	defer log.Close()
	n.proc = exec.Command("ip", append([]string{"netns", "exec", n.ns}, args...)...)
	n.proc.Stdout, n.proc.Stderr = log, log
	if err := n.proc.Start(); err != nil {
		return fmt.Errorf("start %s: %w", n.name, err)
	}
	return nil
}

// alive fails when the node's program has exited, with the end of its log.
func (n *node) alive() error {
	// Not waited for until stop: an exited program is a zombie until then.
	if st := procState(n.proc.Process.Pid); st != "" && st != "Z" {
		return nil
	}
	return fmt.Errorf("%s exited; the end of %s:\n%s", n.name, n.log, tail(n.log, 20))
}

// cpu is the CPU time the node's program used so far (user + system), with that of the
// children it waited for, in seconds: kube-proxy writes through the nft tool, a process of its
// own each sync.
func (n *node) cpu() float64 { return procmem.CPU(n.proc.Process.Pid, true) }

// mem is the program's resident memory and its peak, in MiB.
func (n *node) mem() (rss, hwm float64) { return procmem.Read(strconv.Itoa(n.proc.Process.Pid)) }

func procState(pid int) string {
	if _, f, _ := procmem.Stat(pid); len(f) > 0 {
		return f[0]
	}
	return ""
}

func tail(path string, lines int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var all []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		all = append(all, sc.Text())
		if len(all) > lines {
			all = all[1:]
		}
	}
	return strings.Join(all, "\n")
}

// stop ends the node's program (SIGTERM, then SIGKILL after 10 s).
func (n *node) stop() {
	if n.proc == nil || n.proc.Process == nil {
		return
	}
	_ = n.proc.Process.Signal(unix.SIGTERM)
	done := make(chan struct{})
	go func() { _ = n.proc.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = n.proc.Process.Kill()
		<-done
	}
	n.proc = nil
}

// destroy stops the program and deletes the namespace, and with it every rule.
func (n *node) destroy() {
	n.stop()
	if n.ln != nil {
		n.ln.Close()
	}
	_ = exec.Command("ip", "netns", "delete", n.ns).Run()
}
