package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// namespaces are the lab's namespaces alive now, deleted on SIGINT/SIGTERM too, so an
// interrupted run leaves nothing behind.
var namespaces sync.Map

func init() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		namespaces.Range(func(name, _ any) bool {
			_ = exec.Command("ip", "netns", "del", name.(string)).Run()
			return true
		})
		os.Exit(130)
	}()
}

// measure builds a lab (router and node namespaces, a veth between them), starts the router,
// runs the speaker of mode in the node namespace and returns what it reports. The lab and
// its processes are gone when it returns.
func measure(mode string, prefixes int, timeout time.Duration) (r result, err error) {
	router, node, cleanup, err := newLab()
	defer func() { err = errors.Join(err, cleanup()) }()
	if err != nil {
		return r, err
	}
	rc := exec.Command("ip", "netns", "exec", router, os.Args[0], "-role", "router", "-prefixes", strconv.Itoa(prefixes))
	rc.Stderr = os.Stderr
	in, err := rc.StdinPipe() // closed: the router stops
	if err != nil {
		return r, err
	}
	out, err := rc.StdoutPipe()
	if err != nil {
		return r, err
	}
	if err := rc.Start(); err != nil {
		return r, fmt.Errorf("start the router: %w", err)
	}
	defer func() {
		in.Close()
		done := make(chan struct{})
		go func() { _ = rc.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = rc.Process.Kill()
			<-done
		}
	}()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		return r, fmt.Errorf("the router did not start: %q %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()

	sc := exec.Command("ip", "netns", "exec", node, os.Args[0], "-role", "speaker", "-mode", mode,
		"-prefixes", strconv.Itoa(prefixes), "-timeout", timeout.String(), "-memprofile", memProfile)
	sc.Stderr = os.Stderr
	sc.WaitDelay = 5 * time.Second
	outBytes, err := sc.Output()
	if err != nil {
		return r, fmt.Errorf("speaker: %w", err)
	}
	if err := json.Unmarshal(outBytes, &r); err != nil {
		return r, fmt.Errorf("speaker's report %q: %w", outBytes, err)
	}
	return r, nil
}

// newLab creates the namespaces vipa-bgppfx-<random>-router and -node, joined by a veth with
// routerAddr and nodeAddr. cleanup deletes what was created, also when newLab fails.
func newLab() (router, node string, cleanup func() error, err error) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	prefix := "vipa-bgppfx-" + hex.EncodeToString(rnd[:])
	router, node = prefix+"-router", prefix+"-node"
	var created []string
	cleanup = func() error {
		var errs []error
		for _, ns := range created {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("ip netns del %s: %w: %s", ns, err, out))
			}
			namespaces.Delete(ns)
		}
		return errors.Join(errs...)
	}
	for _, ns := range []string{router, node} {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			return router, node, cleanup, fmt.Errorf("ip netns add %s: %w: %s", ns, err, out)
		}
		created = append(created, ns)
		namespaces.Store(ns, true)
	}
	steps := [][]string{
		{"-n", router, "link", "add", "veth0", "type", "veth", "peer", "name", "veth0", "netns", node},
		{"-n", router, "addr", "add", routerAddr + "/64", "dev", "veth0", "nodad"},
		{"-n", node, "addr", "add", nodeAddr + "/64", "dev", "veth0", "nodad"},
		{"-n", router, "link", "set", "veth0", "up"},
		{"-n", node, "link", "set", "veth0", "up"},
		{"-n", router, "link", "set", "lo", "up"},
		{"-n", node, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			return router, node, cleanup, fmt.Errorf("ip %v: %w: %s", s, err, out)
		}
	}
	return router, node, cleanup, nil
}
