package metricsauth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// cacheKey is a SHA-256: of the bearer token for identities, so the cache never
// holds a usable credential, and of the review's attributes for decisions, so an
// entry has the same size whatever the caller sent.
type cacheKey [sha256.Size]byte

// expiringCache remembers review results for their TTL. It holds at most
// maxEntries: a flood of random tokens makes one TokenReview each, as it would
// without a cache, but cannot grow memory without bound.
type expiringCache[V any] struct {
	maxEntries int

	mu      sync.Mutex
	entries map[cacheKey]cacheEntry[V]
}

type cacheEntry[V any] struct {
	value   V
	expires time.Time
}

func newExpiringCache[V any](maxEntries int) *expiringCache[V] {
	return &expiringCache[V]{maxEntries: maxEntries, entries: make(map[cacheKey]cacheEntry[V])}
}

// get returns the value stored under key unless it has expired at now.
func (c *expiringCache[V]) get(key cacheKey, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// put stores value under key until now+ttl. When the cache is full it first drops
// every expired entry and, if none had, the one closest to expiring: a scan of
// maxEntries, cheap next to the review that produced the value.
func (c *expiringCache[V]) put(key cacheKey, value V, ttl time.Duration, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.maxEntries {
		c.makeRoom(now)
	}
	c.entries[key] = cacheEntry[V]{value: value, expires: now.Add(ttl)}
}

func (c *expiringCache[V]) makeRoom(now time.Time) {
	var soonest cacheKey
	var soonestExpires time.Time
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, k)
			continue
		}
		if soonestExpires.IsZero() || e.expires.Before(soonestExpires) {
			soonest, soonestExpires = k, e.expires
		}
	}
	if len(c.entries) >= c.maxEntries {
		delete(c.entries, soonest)
	}
}

func (c *expiringCache[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
