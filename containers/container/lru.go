package container

import "github.com/hashicorp/golang-lru/v2/simplelru"

// newLRU is a map bounded to n entries (at least one) that evicts the
// least recently used one: golang-lru's simplelru, which is not safe for
// concurrent use; the Resolver holds its locks around each.
func newLRU[K comparable, V any](n int) *simplelru.LRU[K, V] {
	c, _ := simplelru.NewLRU[K, V](max(n, 1), nil) // its only error is a size below 1
	return c
}
