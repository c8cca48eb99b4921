//go:build root && envtest

package cluster

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// openConn is one keep-alive HTTP connection from the client's namespace to
// a VIP, held by the test, answered by one pod for as long as it lives.
type openConn struct {
	net.Conn
	r   *bufio.Reader
	vip string
	pod string
}

// keepAlive opens connections to vip from the client until one is answered by
// a pod on a node that want accepts, and returns it (the others are closed).
func (l *lab) keepAlive(t *testing.T, vip string, want func(node string) bool) *openConn {
	t.Helper()
	for range 30 {
		c, err := dialFrom(l.clientNetns, net.JoinHostPort(vip, "80"))
		if err != nil {
			t.Fatalf("dial %s from %s: %v", vip, l.clientNetns, err)
		}
		conn := &openConn{Conn: c, r: bufio.NewReader(c), vip: vip}
		pod, err := conn.ask()
		if err != nil {
			t.Fatalf("ask %s over a new connection: %v", vip, err)
		}
		conn.pod = pod
		node := l.kubectl(t, "get", "pod", pod, "-o", "jsonpath={.spec.nodeName}")
		if want(node) {
			return conn
		}
		c.Close()
	}
	t.Fatalf("30 connections to %s and none reached a pod on the node wanted", vip)
	return nil
}

// dialFrom opens a TCP connection from inside network namespace name: the
// socket belongs to the namespace it was made in, whichever thread uses it later.
func dialFrom(name, addr string) (net.Conn, error) {
	runtime.LockOSThread()
	here, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer here.Close()
	there, err := netns.GetFromName(name)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer there.Close()
	if err := netns.Set(there); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	c, dialErr := net.DialTimeout("tcp", addr, 3*time.Second)
	if err := netns.Set(here); err != nil {
		// The thread stays locked, so it ends with this goroutine rather
		// than serve another from the wrong namespace.
		return nil, fmt.Errorf("back to this namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return c, dialErr
}

// ask sends one request over the connection and returns who answered.
func (c *openConn) ask() (string, error) {
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(c, "GET /hostname HTTP/1.1\r\nHost: %s\r\n\r\n", c.vip); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, body)
	}
	return strings.TrimSpace(string(body)), nil
}

// stream asks over one connection at an interval until stopped or broken.
type stream struct {
	done     chan struct{}
	wg       sync.WaitGroup
	answered int
	broken   error
}

// askEvery asks over the connection every d, each answer from the same pod.
func (c *openConn) askEvery(d time.Duration) *stream {
	s := &stream{done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			select {
			case <-s.done:
				return
			case <-time.After(d):
			}
			pod, err := c.ask()
			if err == nil && pod != c.pod {
				err = fmt.Errorf("answered by %s, the connection was %s's", pod, c.pod)
			}
			if err != nil {
				s.broken = err
				return
			}
			s.answered++
		}
	}()
	return s
}

// stop ends the stream and says how many answers came and why it broke, if it did.
func (s *stream) stop() (answered int, broken error) {
	close(s.done)
	s.wg.Wait()
	return s.answered, s.broken
}
