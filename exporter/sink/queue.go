package sink

// ring is the queue: a fixed array, so that queueing allocates nothing.
type ring[T any] struct {
	items   []T
	head, n int
}

func (q *ring[T]) full() bool { return q.n == len(q.items) }

func (q *ring[T]) pushBack(it T) {
	q.items[(q.head+q.n)%len(q.items)] = it
	q.n++
}

// pushFront puts items, in order, before the queue's head; the caller made
// room.
func (q *ring[T]) pushFront(items []T) {
	for i := len(items) - 1; i >= 0; i-- {
		q.head = (q.head + len(q.items) - 1) % len(q.items)
		q.items[q.head] = items[i]
		q.n++
	}
}

// popFront removes up to n of the oldest items and returns them; nil when
// empty.
func (q *ring[T]) popFront(n int) []T {
	n = min(n, q.n)
	if n == 0 {
		return nil
	}
	out := make([]T, n)
	var zero T
	for i := range out {
		out[i] = q.items[q.head]
		q.items[q.head] = zero // not to keep what was sent
		q.head = (q.head + 1) % len(q.items)
	}
	q.n -= n
	return out
}
