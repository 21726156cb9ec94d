package sink

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sigscope/sigscope/test/testutil"
)

var errAway = errors.New("connection refused")

// dest is a destination that fails while down, and keeps what it took.
type dest struct {
	mu    sync.Mutex
	down  bool
	block chan struct{} // when set, Send waits for it or ctx
	got   []int
	tries int
}

func (d *dest) send(ctx context.Context, batch []int) (Done, error) {
	d.mu.Lock()
	d.tries++
	block := d.block
	d.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return Done{}, ctx.Err()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down {
		return Done{}, errAway
	}
	d.got = append(d.got, batch...)
	return Done{Sent: len(batch)}, nil
}

func (d *dest) set(down bool) {
	d.mu.Lock()
	d.down = down
	d.mu.Unlock()
}

func (d *dest) taken() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.got)
}

func newSink(d *dest, o Options[int]) *Sink[int] {
	o.Send = d.send
	o.RetryMin, o.RetryMax = time.Millisecond, 2*time.Millisecond
	return New(o)
}

// While the destination is away the queue keeps the newest, the item that
// failed included (it is the oldest), and sends them in order once it is
// back.
func TestOutageKeepsTheNewest(t *testing.T) {
	d := &dest{down: true}
	s := newSink(d, Options[int]{QueueSize: 3, BatchSize: 2})
	go s.Run(context.Background())
	defer s.Close()
	for i := range 10 {
		s.Add(i)
	}
	testutil.WaitFor(t, "retries", func() bool { return s.Retries() >= 2 })
	testutil.WaitFor(t, "the oldest dropped", func() bool { return s.Queued() == 3 })
	testutil.Accounted(t, s, 10)
	d.set(false)
	testutil.WaitFor(t, "the queue sent", func() bool { return s.Queued() == 0 })
	if got := d.taken(); !slices.Equal(got, []int{7, 8, 9}) {
		t.Errorf("sent %v, want the newest three in order", got)
	}
	if s.Sent() != 3 || s.Dropped() != 7 || s.Failed() != 0 {
		t.Errorf("sent %d dropped %d failed %d, want 3 7 0", s.Sent(), s.Dropped(), s.Failed())
	}
}

// With KeepFailed the worker keeps the item that failed, tried again until
// it is sent, while the queue keeps the newest of the rest.
func TestKeepFailed(t *testing.T) {
	d := &dest{down: true}
	s := newSink(d, Options[int]{QueueSize: 2, KeepFailed: true})
	go s.Run(context.Background())
	defer s.Close()
	s.Add(0)
	testutil.WaitFor(t, "a retry", func() bool { return s.Retries() >= 1 })
	for i := 1; i < 10; i++ {
		s.Add(i)
	}
	testutil.WaitFor(t, "more retries", func() bool { return s.Retries() >= 3 })
	d.set(false)
	testutil.WaitFor(t, "the queue sent", func() bool { return s.Queued() == 0 })
	if got := d.taken(); !slices.Equal(got, []int{0, 8, 9}) {
		t.Errorf("sent %v, want the one in hand, then the newest two", got)
	}
	testutil.Accounted(t, s, 10)
}

// Size: an item counts for its units, and Send finishes part of one.
func TestUnits(t *testing.T) {
	type job struct{ left int }
	var mu sync.Mutex
	down := true
	s := New(Options[*job]{
		QueueSize: 4,
		Size:      func(j *job) int { return j.left },
		RetryMin:  time.Millisecond, RetryMax: time.Millisecond,
		Send: func(_ context.Context, b []*job) (Done, error) {
			mu.Lock()
			defer mu.Unlock()
			j := b[0]
			if down && j.left == 3 { // the first unit goes, then the destination fails
				j.left--
				return Done{Sent: 1}, errAway
			}
			if down {
				return Done{}, errAway
			}
			n := j.left
			j.left = 0
			return Done{Failed: n}, nil
		},
	})
	go s.Run(context.Background())
	defer s.Close()
	s.Add(&job{left: 3})
	testutil.WaitFor(t, "one unit sent, then a failure", func() bool { return s.Sent() == 1 && s.Retries() >= 2 })
	if s.Queued() != 2 {
		t.Errorf("queued %d, want the 2 units left", s.Queued())
	}
	mu.Lock()
	down = false
	mu.Unlock()
	testutil.WaitFor(t, "the rest refused", func() bool { return s.Queued() == 0 })
	if s.Sent() != 1 || s.Failed() != 2 || s.Dropped() != 0 {
		t.Errorf("sent %d failed %d dropped %d, want 1 2 0", s.Sent(), s.Failed(), s.Dropped())
	}
}

// Run's context ending drains the queue, bounded by DrainTimeout even when
// the destination hangs, counts what is left as dropped, drops what comes
// after, and leaves no goroutine behind.
func TestDrainBounded(t *testing.T) {
	before := runtime.NumGoroutine()
	d := &dest{block: make(chan struct{})}
	s := newSink(d, Options[int]{QueueSize: 10, DrainTimeout: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { s.Run(ctx); close(ran) }()
	for i := range 3 {
		s.Add(i)
	}
	testutil.WaitFor(t, "a send in flight", func() bool { d.mu.Lock(); defer d.mu.Unlock(); return d.tries > 0 })
	start := time.Now()
	cancel()
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return with the destination hanging")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the drain took %v, bound 100ms", took)
	}
	s.Add(3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.Dropped() != 4 || s.Sent() != 0 || s.Queued() != 0 {
		t.Errorf("dropped %d sent %d queued %d, want 4 0 0", s.Dropped(), s.Sent(), s.Queued())
	}
	testutil.WaitFor(t, "the worker's goroutines gone", func() bool { return runtime.NumGoroutine() <= before })
}

// Close without Run gives what was queued its last try itself; a Run
// after it returns at once.
func TestCloseWithoutRun(t *testing.T) {
	d := &dest{}
	s := newSink(d, Options[int]{QueueSize: 10})
	for i := range 3 {
		s.Add(i)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := d.taken(); !slices.Equal(got, []int{0, 1, 2}) || s.Sent() != 3 {
		t.Errorf("sent %v (%d), want 0 1 2", got, s.Sent())
	}
	done := make(chan struct{})
	go func() { s.Run(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(testutil.Bound):
		t.Fatal("Run after Close did not return")
	}
	_ = s.Close() // idempotent
}

// At shutdown an item that fails transiently is not waited for: each gets
// one more try, and what fails is dropped.
func TestDrainDoesNotWait(t *testing.T) {
	d := &dest{down: true}
	s := New(Options[int]{QueueSize: 10, KeepFailed: true, Send: d.send, RetryMin: time.Hour})
	go s.Run(context.Background())
	for i := range 3 {
		s.Add(i)
	}
	testutil.WaitFor(t, "a failure", func() bool { return s.Retries() >= 1 })
	start := time.Now()
	_ = s.Close()
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Close took %v: it waited out the backoff", took)
	}
	if s.Dropped() != 3 || s.Retries() != 4 {
		t.Errorf("dropped %d retries %d, want 3 dropped after 4 tries (the first, then one each)", s.Dropped(), s.Retries())
	}
}

// The collector reads the counts under the output's names.
func TestCollector(t *testing.T) {
	d := &dest{}
	s := newSink(d, Options[int]{QueueSize: 10})
	s.Add(1)
	_ = s.Close()
	total := prometheus.NewDesc("x_total", "Things.", []string{"result"}, nil)
	queued := prometheus.NewDesc("x_queued", "Waiting.", nil, nil)
	c := Collector{Counter(total, s.Sent, "sent"), Counter(total, s.Dropped, "dropped"), Gauge(queued, s.Queued)}
	want := `
# HELP x_queued Waiting.
# TYPE x_queued gauge
x_queued 0
# HELP x_total Things.
# TYPE x_total counter
x_total{result="dropped"} 0
x_total{result="sent"} 1
`
	if err := promtestutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	// A label value missing: an error of the scrape, not a panic.
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector{Counter(total, s.Sent)})
	if _, err := reg.Gather(); err == nil {
		t.Error("a rejected series gathered without an error")
	}
}
