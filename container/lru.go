package container

import "container/list"

// lru is a map bounded to max entries that evicts the least recently used
// one. Not safe for concurrent use: the Resolver holds its lock around it.
type lru[K comparable, V any] struct {
	max int
	ll  *list.List // front: most recently used
	m   map[K]*list.Element
}

type lruItem[K comparable, V any] struct {
	k K
	v V
}

func newLRU[K comparable, V any](max int) *lru[K, V] {
	return &lru[K, V]{max: max, ll: list.New(), m: make(map[K]*list.Element)}
}

// get returns the value for k and marks it used.
func (c *lru[K, V]) get(k K) (V, bool) {
	if e, ok := c.m[k]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*lruItem[K, V]).v, true
	}
	var zero V
	return zero, false
}

// put sets k to v, marks it used and evicts the oldest entry when full.
func (c *lru[K, V]) put(k K, v V) {
	if e, ok := c.m[k]; ok {
		e.Value.(*lruItem[K, V]).v = v
		c.ll.MoveToFront(e)
		return
	}
	c.m[k] = c.ll.PushFront(&lruItem[K, V]{k, v})
	for c.ll.Len() > c.max {
		oldest := c.ll.Back()
		c.ll.Remove(oldest)
		delete(c.m, oldest.Value.(*lruItem[K, V]).k)
	}
}

func (c *lru[K, V]) len() int { return c.ll.Len() }

// remove deletes k.
func (c *lru[K, V]) remove(k K) {
	if e, ok := c.m[k]; ok {
		c.ll.Remove(e)
		delete(c.m, k)
	}
}

// each calls fn for every entry, most recently used first, without marking
// them used; fn must not change c.
func (c *lru[K, V]) each(fn func(K, V)) {
	for e := c.ll.Front(); e != nil; e = e.Next() {
		it := e.Value.(*lruItem[K, V])
		fn(it.k, it.v)
	}
}
