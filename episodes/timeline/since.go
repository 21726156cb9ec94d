package timeline

import "github.com/hashicorp/golang-lru/v2/simplelru"

// procKey names a process across pid reuse: its host pid and its pid
// namespace.
type procKey struct{ pid, ns uint32 }

// starts remembers the main processes whose start was seen (their exec
// from outside their namespace, which a container's first process does), so
// that an episode of theirs is known to be whole even when it comes soon
// after tracing began. It is bounded by Options.MaxOpen, oldest out first:
// a start forgotten only makes an early episode say it may be incomplete.
type starts struct {
	set *simplelru.LRU[procKey, struct{}]
}

func newStarts(max int) starts { return starts{set: newLRU[procKey, struct{}](max)} }

func (s *starts) add(k procKey) { s.set.Add(k, struct{}{}) }

func (s *starts) seen(k procKey) bool { return s.set.Contains(k) }

// forget drops a process that has ended: its pid may come back as another.
func (s *starts) forget(k procKey) { s.set.Remove(k) }

// newLRU is a bounded map that drops its least recently used entry past n
// (at least 1): the engine's one kind of bounded record.
func newLRU[K comparable, V any](n int) *simplelru.LRU[K, V] {
	l, _ := simplelru.NewLRU[K, V](max(n, 1), nil) // its only error is a size below 1
	return l
}
