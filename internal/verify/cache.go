package verify

import (
	"container/list"
	"strings"
	"sync"
	"time"
)

// DefaultCacheSize is how many verdicts a Cache keeps when no size is given.
const DefaultCacheSize = 1024

// Cache is a bounded LRU of verdicts keyed by repository, digest and trust fingerprint. It is
// safe for concurrent use and may be shared by many Verifiers (one per Stage, say): keys
// include the fingerprint of the trusted keys, so verifiers with different keys never mix.
type Cache struct {
	mu    sync.Mutex
	size  int
	order *list.List // front = most recently used
	items map[string]*list.Element
}

type cacheEntry struct {
	key     string
	verdict Verdict
	expires time.Time // zero: never
}

// NewCache returns a cache holding at most size verdicts (DefaultCacheSize when size <= 0).
func NewCache(size int) *Cache {
	if size <= 0 {
		size = DefaultCacheSize
	}
	return &Cache{size: size, order: list.New(), items: map[string]*list.Element{}}
}

// Len is the number of verdicts held.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

func (c *Cache) get(key string, now time.Time) (Verdict, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return Verdict{}, false
	}
	e := el.Value.(*cacheEntry)
	if !e.expires.IsZero() && !now.Before(e.expires) {
		c.order.Remove(el)
		delete(c.items, key)
		return Verdict{}, false
	}
	c.order.MoveToFront(el)
	return e.verdict, true
}

func (c *Cache) put(key string, v Verdict, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		el.Value = &cacheEntry{key: key, verdict: v, expires: expires}
		c.order.MoveToFront(el)
		return
	}
	c.items[key] = c.order.PushFront(&cacheEntry{key: key, verdict: v, expires: expires})
	for c.order.Len() > c.size {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*cacheEntry).key)
	}
}

// Remember keeps a verdict reached elsewhere (an attestation requirement's) under key until
// expires (zero: until evicted).
func (c *Cache) Remember(key string, v Verdict, expires time.Time) { c.put(key, v, expires) }

// Recall returns the verdict Remember kept under key, if it has not expired.
func (c *Cache) Recall(key string, now time.Time) (Verdict, bool) { return c.get(key, now) }

// ForgetUnsigned drops the verdicts of a repository (as go-containerregistry names it, such as
// registry.example/deploy/payments) that are not Verified, whatever trust they were reached
// with, so the next Verify of those digests asks the registry again. A registry source calls it
// on each listing: CI pushes an image and signs it a moment later, and a listing in between
// must not keep "no signature" cached past the next listing (or a re-list a person asks for).
// It returns how many verdicts it dropped.
func (c *Cache) ForgetUnsigned(repository string) int {
	prefix := repository + "@"
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for key, el := range c.items {
		if strings.HasPrefix(key, prefix) && !el.Value.(*cacheEntry).verdict.Verified {
			c.order.Remove(el)
			delete(c.items, key)
			n++
		}
	}
	return n
}
