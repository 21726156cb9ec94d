package kubeevents

import (
	"math/rand/v2"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The sender's queue and its wait between tries.

// backoff is the wait between tries: doubling from min to max, at least
// what a 429 or 5xx answer asks for (Retry-After), and up to a fifth more
// at random, so that the agents of a cluster do not all come back at once.
type backoff struct{ min, max, cur time.Duration }

func (b *backoff) reset() { b.cur = 0 }

func (b *backoff) next(err error) time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	d := b.cur
	if s, ok := apierrors.SuggestsClientDelay(err); ok {
		d = max(d, min(time.Duration(s)*time.Second, b.max))
	}
	return d + rand.N(d/5+1)
}

// ring is the queue: a fixed array, so that queueing allocates nothing.
type ring struct {
	jobs    []*job
	head, n int
}

func (q *ring) full() bool { return q.n == len(q.jobs) }

func (q *ring) pushBack(j *job) {
	q.jobs[(q.head+q.n)%len(q.jobs)] = j
	q.n++
}

func (q *ring) pushFront(j *job) {
	q.head = (q.head + len(q.jobs) - 1) % len(q.jobs)
	q.jobs[q.head] = j
	q.n++
}

// popFront returns the oldest job, nil when empty.
func (q *ring) popFront() *job {
	if q.n == 0 {
		return nil
	}
	j := q.jobs[q.head]
	q.jobs[q.head] = nil
	q.head = (q.head + 1) % len(q.jobs)
	q.n--
	return j
}
