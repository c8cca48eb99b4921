package dataplane

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// binaries are the three iptables programs of one family and backend, called by full path so
// that the node's "iptables" alternative never decides the backend for us.
type binaries struct {
	cmd, save, restore string
}

func lookBinaries(fam Family, backend string) (binaries, error) {
	base := "iptables-" + backend
	if fam == IPv6 {
		base = "ip6tables-" + backend
	}
	var b binaries
	for _, x := range []struct {
		dst  *string
		name string
	}{{&b.cmd, base}, {&b.save, base + "-save"}, {&b.restore, base + "-restore"}} {
		p, err := exec.LookPath(x.name)
		if err != nil {
			return b, fmt.Errorf("find %s: %w", x.name, err)
		}
		*x.dst = p
	}
	return b, nil
}

// run runs one program and returns its stdout; the error carries stderr.
func run(path string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", path, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

var failedLine = regexp.MustCompile(`line:? (\d+)`)

// restore runs one iptables-restore --noflush and streams it what write spells, through a
// pipe: the payload (15 MB at 10,000 Services) is never held in memory whole. Every chain the
// payload declares is flushed and refilled; chains and rules it does not mention are left
// alone; each table is committed at once.
func restore(b binaries, write func(sink)) error {
	cmd := exec.Command(b.restore, "--noflush", "--wait=5")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", b.restore, err)
	}
	bw := bufio.NewWriterSize(stdin, 256<<10)
	write(bw)
	werr := bw.Flush() // fails if the command gave up early; its own error says more
	_ = stdin.Close()  // Wait reports what failed; a close error adds nothing
	if err := cmd.Wait(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		// iptables-restore names only a line number: quote the line so the log says what failed.
		if m := failedLine.FindStringSubmatch(msg); m != nil {
			if n, convErr := strconv.Atoi(m[1]); convErr == nil {
				lc := &lineCatcher{want: n}
				write(lc)
				msg += fmt.Sprintf(" (line %d: %s)", n, lc.line.Bytes())
			}
		}
		return fmt.Errorf("%s: %w: %s", b.restore, err, msg)
	}
	if werr != nil {
		return fmt.Errorf("%s: write payload: %w", b.restore, werr)
	}
	return nil
}

// lineCatcher is a sink that keeps only line number want (from 1).
type lineCatcher struct {
	want, at int
	line     bytes.Buffer
}

func (c *lineCatcher) Write(p []byte) (int, error) {
	for _, ch := range p {
		_ = c.WriteByte(ch)
	}
	return len(p), nil
}

func (c *lineCatcher) WriteString(s string) (int, error) { return c.Write([]byte(s)) }

func (c *lineCatcher) WriteByte(ch byte) error {
	if ch == '\n' {
		c.at++
	} else if c.at == c.want-1 {
		c.line.WriteByte(ch)
	}
	return nil
}

// found is what a full Sync needs to know of iptables before writing: our chains, per table,
// and which of our jumps exist.
type found struct {
	chains map[string][]string
	jumps  map[jump]bool
}

// scanSave reads our chains and jumps from iptables-save, as a stream: at 10,000 Services the
// nat table dumps to ~15 MB.
func scanSave(b binaries) (found, error) {
	f := found{chains: map[string][]string{}, jumps: map[jump]bool{}}
	for _, table := range tables {
		cmd := exec.Command(b.save, "-t", table)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			return f, err
		}
		if err := cmd.Start(); err != nil {
			return f, fmt.Errorf("%s -t %s: %w", b.save, table, err)
		}
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, ":"+chainPrefix):
				name, _, _ := strings.Cut(line[1:], " ")
				f.chains[table] = append(f.chains[table], name)
			case strings.HasPrefix(line, "-A ") && !strings.HasPrefix(line, "-A "+chainPrefix):
				for _, j := range jumps {
					if j.table == table && j.matches(line) {
						f.jumps[j] = true
					}
				}
			}
		}
		scanErr := sc.Err()
		if scanErr != nil {
			_, _ = io.Copy(io.Discard, pipe) // let the command finish
		}
		if err := cmd.Wait(); err != nil {
			return f, fmt.Errorf("%s -t %s: %w: %s", b.save, table, err, strings.TrimSpace(stderr.String()))
		}
		if scanErr != nil {
			return f, fmt.Errorf("read %s -t %s: %w", b.save, table, scanErr)
		}
	}
	return f, nil
}

// nftChains lists our chains with the nft tool. iptables-nft-save is quadratic in the number
// of chains (7 s for the nat table at 10,000 Services, on iptables 1.8.9); "nft list chains"
// takes 10 ms and names every chain of the tables iptables-nft uses.
func nftChains(nft string, fam Family) (map[string][]string, error) {
	family := "ip"
	if fam == IPv6 {
		family = "ip6"
	}
	out, err := run(nft, "list", "chains", family)
	if err != nil {
		return nil, err
	}
	chains := map[string][]string{}
	table := ""
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) == 4 && fields[0] == "table" && fields[1] == family:
			table = fields[2]
		case len(fields) >= 2 && fields[0] == "chain" && strings.HasPrefix(fields[1], chainPrefix) &&
			slices.Contains(tables, table):
			chains[table] = append(chains[table], fields[1])
		}
	}
	return chains, nil
}

// kubeletHints are the chains kubelet (and kube-proxy's iptables-wrapper) create in table
// mangle of the backend the node uses.
var kubeletHints = [][]byte{[]byte(":KUBE-IPTABLES-HINT "), []byte(":KUBE-KUBELET-CANARY ")}

// detectBackend picks the backend the node's other components use, as iptables-wrapper does:
// a kubelet hint in mangle first, else the backend holding more rules, nft when in doubt.
func detectBackend() string {
	saves := func(backend string, args ...string) [][]byte {
		var outs [][]byte
		for _, name := range []string{"iptables-" + backend + "-save", "ip6tables-" + backend + "-save"} {
			if p, err := exec.LookPath(name); err == nil {
				if out, err := run(p, args...); err == nil {
					outs = append(outs, out)
				}
			}
		}
		return outs
	}
	for _, backend := range []string{"nft", "legacy"} {
		for _, out := range saves(backend, "-t", "mangle") {
			for _, h := range kubeletHints {
				if bytes.Contains(out, h) {
					return backend
				}
			}
		}
	}
	count := func(backend string) int {
		n := 0
		for _, out := range saves(backend) {
			n += bytes.Count(out, []byte("\n-"))
		}
		return n
	}
	if count("legacy") > count("nft") {
		return "legacy"
	}
	return "nft"
}

var errBackend = errors.New(`backend must be "", "nft" or "legacy"`)
