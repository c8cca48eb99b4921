// Package netnstest moves the calling goroutine into a throwaway network namespace, so tests and
// benchmarks can run iptables and change links, addresses and routes without touching the host's,
// and builds a test's network there (links.go). It is for tests and benchmarks only: the agent
// itself always runs in the node's namespace.
package netnstest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// Enter creates the network namespace prefix-<random> and moves the calling goroutine's OS
// thread into it. Network namespaces belong to threads, and a child process starts in its
// parent thread's namespace, so every iptables command the goroutine runs is confined there.
//
// The goroutine stays locked to the thread for good, so it must do all its iptables work
// itself (not in other goroutines) and, once it exits, Go discards the thread instead of
// reusing it. leave moves the thread back and deletes the namespace, which frees all its rules.
func Enter(prefix string) (name string, leave func() error, err error) {
	runtime.LockOSThread() // never unlocked, see above
	name = randomName(prefix)

	orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		return "", nil, err
	}
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		orig.Close()
		return "", nil, fmt.Errorf("ip netns add %s: %w: %s", name, err, out)
	}
	del := func() error {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			return fmt.Errorf("ip netns del %s: %w: %s", name, err, out)
		}
		return nil
	}
	leave = func() error {
		err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET)
		orig.Close()
		if err != nil {
			// Still inside: deleting the name is fine, the thread dies with the goroutine.
			return errors.Join(fmt.Errorf("setns back: %w", err), del())
		}
		return del()
	}
	ns, err := os.Open("/run/netns/" + name)
	if err != nil {
		return "", nil, errors.Join(err, leave())
	}
	defer ns.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return "", nil, errors.Join(fmt.Errorf("setns %s: %w", name, err), leave())
	}
	// Refuse to go on unless this thread really is in the new namespace.
	var want, got unix.Stat_t
	if err := errors.Join(unix.Fstat(int(ns.Fd()), &want), unix.Stat(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), &got)); err != nil || want.Ino != got.Ino {
		return "", nil, errors.Join(fmt.Errorf("thread is not in namespace %s", name), err, leave())
	}
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return "", nil, errors.Join(fmt.Errorf("lo up: %w: %s", err, out), leave())
	}
	return name, leave, nil
}

// Do runs f on an OS thread switched into the named network namespace (under /run/netns),
// then switches the thread back. A socket f opens stays in that namespace, so a caller can
// listen inside a namespace and serve from any goroutine.
//
// A thread that cannot switch back stays locked to the goroutine, and Go ends it with the
// goroutine, so that no other goroutine runs in the namespace; the error says so.
func Do(name string, f func() error) (err error) {
	runtime.LockOSThread()
	back := false // whether the thread is back in its own namespace, and may serve others
	defer func() {
		if back {
			runtime.UnlockOSThread()
		}
	}()
	self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		back = true
		return err
	}
	defer func() { err = errors.Join(err, unix.Close(self)) }()
	target, err := unix.Open("/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		back = true
		return err
	}
	defer func() { err = errors.Join(err, unix.Close(target)) }()
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		back = true
		return err
	}
	defer func() {
		if serr := unix.Setns(self, unix.CLONE_NEWNET); serr != nil {
			err = errors.Join(err, fmt.Errorf("setns back from %s: %w", name, serr))
			return
		}
		back = true
	}()
	return f()
}
