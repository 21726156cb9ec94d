package container

import (
	"sync"
)

// flight runs one function per key at a time; concurrent callers for the
// same key wait for its result instead of repeating the work.
type flight[K comparable, V any] struct {
	mu    sync.Mutex
	calls map[K]*flightCall[V]
}

type flightCall[V any] struct {
	done chan struct{}
	v    V
}

func (f *flight[K, V]) do(k K, fn func() V) V {
	f.mu.Lock()
	if c, ok := f.calls[k]; ok {
		f.mu.Unlock()
		<-c.done
		return c.v
	}
	if f.calls == nil {
		f.calls = make(map[K]*flightCall[V])
	}
	c := &flightCall[V]{done: make(chan struct{})}
	f.calls[k] = c
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.calls, k)
		f.mu.Unlock()
		close(c.done)
	}()
	c.v = fn()
	return c.v
}
