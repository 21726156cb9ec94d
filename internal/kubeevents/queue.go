package kubeevents

import (
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The sender's queue and its wait between tries.

// retryAfter is the wait a 429 or 5xx answer asks for (Retry-After); 0
// for none.
func retryAfter(err error) time.Duration {
	if s, ok := apierrors.SuggestsClientDelay(err); ok {
		return time.Duration(s) * time.Second
	}
	return 0
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
