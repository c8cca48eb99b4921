package membership

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"

	"github.com/hashicorp/memberlist"
)

// SetKeys makes keys (primary first) this member's keyring: every key is
// installed before the primary changes, and keys not listed are removed only
// after. A rotation that never splits the members is three calls on every
// member, each done everywhere before the next starts: [old, new] (everyone
// can read new), [new, old] (everyone writes new; stragglers still writing old
// are read), [new] (nobody writes old any more).
func (c *Cluster) SetKeys(keys [][]byte) error {
	if err := validKeys(keys); err != nil {
		return fmt.Errorf("set keys: %w", err)
	}
	for _, k := range keys {
		if err := c.keyring.AddKey(k); err != nil {
			return fmt.Errorf("set keys: add: %w", err)
		}
	}
	if err := c.keyring.UseKey(keys[0]); err != nil {
		return fmt.Errorf("set keys: use primary: %w", err)
	}
	for _, installed := range c.keyring.GetKeys() {
		listed := false
		for _, k := range keys {
			listed = listed || bytes.Equal(k, installed)
		}
		if !listed {
			if err := c.keyring.RemoveKey(installed); err != nil {
				return fmt.Errorf("set keys: remove: %w", err)
			}
		}
	}
	return nil
}

// Keys returns the installed keys' fingerprints, the primary's first.
func (c *Cluster) Keys() []string {
	primary := c.keyring.GetPrimaryKey()
	out := []string{Fingerprint(primary)}
	for _, k := range c.keyring.GetKeys() {
		if !bytes.Equal(k, primary) {
			out = append(out, Fingerprint(k))
		}
	}
	return out
}

// Fingerprint names a key without revealing it: the first 8 hex digits of its
// SHA-256 (`base64 -d | sha256sum | cut -c1-8` of the Secret's entry).
func Fingerprint(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:4])
}

// Rejected counts the alive claims not believed: those of members Admit
// refused, and those relayed or sent from another address whose member did
// not answer at the address it claims.
func (c *Cluster) Rejected() uint64 { return c.rejected.Load() }

// NotifyAlive is memberlist's hook before it counts a member alive (also for
// the members of a full state exchange): Admit's verdict on it. Our own
// member is always admitted.
func (d delegate) NotifyAlive(n *memberlist.Node) error {
	if n.Name == d.c.name || d.c.admit == nil {
		return nil
	}
	addr, _ := netip.AddrFromSlice(n.Addr)
	if err := d.c.admit(nodeOf(n.Name), addr.Unmap()); err != nil {
		d.c.rejected.Add(1)
		d.c.log.Info("member not counted", "member", n.Name, "address", memberAddr(n), "reason", err.Error())
		return err
	}
	return nil
}
