package testutil

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// HTTPAttempt is one request of an HTTPLoad: when its connect began and
// returned (Connected zero when it failed), when its outcome was known, and
// the outcome: "ok", "refused", "reset" (established, then broken before
// the answer; or reset before connect returned), "timeout", "other: ...".
type HTTPAttempt struct {
	Dialed, Connected, Ended time.Time
	Outcome                  string
}

// HTTPLoad is a client that makes HTTP/1.0 requests without pause, one
// connection each, from a number of workers, and keeps every outcome: the
// ground truth the kernel's connection counts are held to.
type HTTPLoad struct {
	mu       sync.Mutex
	attempts []HTTPAttempt
	stop     chan struct{}
	wg       sync.WaitGroup
}

// StartHTTPLoad starts workers requesting addr. netnsOf, when not 0, is a
// process whose network namespace each worker's thread enters first (a
// client beside the server, as a pod's neighbour or a sidecar is).
func StartHTTPLoad(addr string, workers int, dialTimeout time.Duration, netnsOf int) (*HTTPLoad, error) {
	return startLoad(workers, netnsOf, 0, func() (func() HTTPAttempt, func()) {
		return func() HTTPAttempt { return httpRequest(addr, dialTimeout) }, func() {}
	})
}

// startLoad starts workers that each enter netnsOf's network namespace
// (none when 0) and call the request newWorker gives it until Stop,
// keeping every attempt: a failed one is followed by a short pause (a
// client retrying, not a flood), an answered one by think. done runs when
// the worker ends.
func startLoad(workers, netnsOf int, think time.Duration, newWorker func() (request func() HTTPAttempt, done func())) (*HTTPLoad, error) {
	l := &HTTPLoad{stop: make(chan struct{})}
	entered := make(chan error, workers)
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			if err := enterNetNS(netnsOf); err != nil {
				entered <- err
				return
			}
			entered <- nil
			request, done := newWorker()
			defer done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				a := request()
				l.mu.Lock()
				l.attempts = append(l.attempts, a)
				l.mu.Unlock()
				if a.Outcome != "ok" {
					time.Sleep(5 * time.Millisecond)
				} else if think > 0 {
					time.Sleep(think)
				}
			}
		}()
	}
	var err error
	for range workers {
		err = errors.Join(err, <-entered)
	}
	if err != nil {
		l.Stop()
		return nil, err
	}
	return l, nil
}

// Stop ends the load (again: nothing) and returns every attempt.
func (l *HTTPLoad) Stop() []HTTPAttempt {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.attempts
}

// WaitAnswered waits until the server has answered a request of the load:
// it listens and serves, with whatever it set up before (its signal
// handlers).
func (l *HTTPLoad) WaitAnswered(t testing.TB) {
	t.Helper()
	WaitFor(t, "an answer to the load", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return slices.ContainsFunc(l.attempts, func(a HTTPAttempt) bool { return a.Outcome == "ok" })
	})
}

// Outcomes counts attempts by outcome.
func Outcomes(as []HTTPAttempt) map[string]int {
	m := map[string]int{}
	for _, a := range as {
		m[a.Outcome]++
	}
	return m
}

// Tally is clients' count of their requests' outcomes within a stop's
// counting window: a request sent after the counts were read (until) is not
// the stop's, and one that spans the read may be counted either way
// (AtUntil).
type Tally struct {
	OK, Reset, Refused int
	AtUntil            int // failures whose request spans until, give or take slack
	After              int // failures sent after until+slack: not counted
	Other              map[string]int
}

// TallyWindow counts attempts' outcomes against a count read at until.
func TallyWindow(attempts []HTTPAttempt, until time.Time, slack time.Duration) Tally {
	tl := Tally{Other: map[string]int{}}
	for _, a := range attempts {
		if a.Outcome != "ok" {
			if a.Dialed.After(until.Add(slack)) {
				tl.After++
				continue
			}
			if a.Ended.After(until.Add(-slack)) {
				tl.AtUntil++
			}
		}
		switch a.Outcome {
		case "ok":
			tl.OK++
		case "reset":
			tl.Reset++
		case "refused":
			tl.Refused++
		default:
			tl.Other[a.Outcome]++
		}
	}
	return tl
}

// EpisodeLost is what an episode's traffic counted of the kinds a
// client's failure can be (Refused nil where the kernel cannot count it).
type EpisodeLost struct {
	Unanswered, AfterClose, Cut, ResetSent, Undecided, Lost int
	Refused                                                 *int
}

// CheckLost holds an episode's counts to the clients' own (tl): every
// broken request is one lost (read and never answered, sent after the
// close, cut, reset) or, at most, undecided, and none lost that a client
// had answered, give or take those that span the read; refused ones are
// refused; lost is their sum. It returns the broken count.
func (tl Tally) CheckLost(t testing.TB, e EpisodeLost) (broken int) {
	t.Helper()
	broken = e.Unanswered + e.AfterClose + e.Cut + e.ResetSent
	if broken > tl.Reset+tl.AtUntil || broken+e.Undecided < tl.Reset {
		t.Errorf("sigscope: %d broken requests (%d unanswered, %d after the close, %d cut, %d reset) and %d undecided; the clients: %d broken (%d at the read)",
			broken, e.Unanswered, e.AfterClose, e.Cut, e.ResetSent, e.Undecided, tl.Reset, tl.AtUntil)
	}
	refused := 0
	if e.Refused != nil {
		refused = *e.Refused
		if refused > tl.Refused || refused+tl.AtUntil < tl.Refused {
			t.Errorf("refused: sigscope %d, the clients %d (%d at the read)", refused, tl.Refused, tl.AtUntil)
		}
	}
	if e.Lost != broken+refused {
		t.Errorf("lost %d, want %d", e.Lost, broken+refused)
	}
	return broken
}

// LastArrivalBounds is where the last request a server's kernel saw
// while it counted (until) must lie, from the clients' own log: no earlier
// than the last one sent of those that surely arrived (ended before until:
// answered, broken, refused), no later than the last end of any sent
// before until. ok is false when none was sent.
func LastArrivalBounds(attempts []HTTPAttempt, until time.Time) (lo, hi time.Time, ok bool) {
	for _, a := range attempts {
		if a.Outcome != "ok" && a.Outcome != "reset" && a.Outcome != "refused" || a.Dialed.After(until) {
			continue
		}
		ok = true
		if a.Ended.Before(until) && a.Dialed.After(lo) {
			lo = a.Dialed
		}
		if a.Ended.After(hi) {
			hi = a.Ended
		}
	}
	return lo, hi, ok
}

// dialOutcome is a failed dial's outcome.
func dialOutcome(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET):
		// Established in the kernel (the server's accept queue), then
		// reset before connect() returned: the server died.
		return "reset"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "other: " + err.Error()
}

func httpRequest(addr string, dialTimeout time.Duration) (a HTTPAttempt) {
	a.Dialed = time.Now()
	defer func() { a.Ended = time.Now() }()
	conn, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil {
		a.Outcome = dialOutcome(err)
		return a
	}
	a.Connected = time.Now()
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.WriteString(conn, "GET / HTTP/1.0\r\n\r\n"); err != nil {
		a.Outcome = "reset"
		return a
	}
	status, err := bufio.NewReader(conn).ReadString('\n')
	switch {
	case err == nil && strings.HasPrefix(status, "HTTP/1.0 200"):
		io.Copy(io.Discard, conn)
		a.Outcome = "ok"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF):
		a.Outcome = "reset"
	case err != nil && errors.Is(err, os.ErrDeadlineExceeded):
		a.Outcome = "timeout"
	default:
		a.Outcome = fmt.Sprintf("other: %q %v", status, err)
	}
	return a
}

// StartKeepAliveLoad starts workers that each keep one HTTP/1.1 connection
// to addr and send requests on it, think apart: what a proxy's or an HTTP
// client's connection pool does. Each request is a POST, never retried: a
// request that breaks is the client's failure ("reset": the connection
// closed or reset before the answer came; a pool would turn it into a
// 502), and the worker dials a new connection for the next one. An answer
// with "Connection: close" ends the connection cleanly. Attempts record
// each request: Dialed is when it was sent (or its connection dialled),
// Connected when its connection was established, zero for one sent on a
// connection kept from before. netnsOf as for StartHTTPLoad.
func StartKeepAliveLoad(addr string, workers int, think time.Duration, netnsOf int) (*HTTPLoad, error) {
	return startLoad(workers, netnsOf, think, func() (func() HTTPAttempt, func()) {
		var c *keepAliveConn
		request := func() (a HTTPAttempt) {
			c, a = keepAliveRequest(addr, c)
			return a
		}
		return request, func() {
			if c != nil {
				c.conn.Close()
			}
		}
	})
}

// enterNetNS moves the calling goroutine's thread, locked to it for good,
// into the network namespace of pid; nothing when pid is 0.
func enterNetNS(pid int) error {
	if pid == 0 {
		return nil
	}
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err == nil {
		err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("entering the network namespace of %d: %w", pid, err)
	}
	return nil
}

// keepAliveConn is a worker's connection, kept between requests.
type keepAliveConn struct {
	conn net.Conn
	r    *bufio.Reader
}

// keepAliveRequest sends one request on c, or on a new connection when c
// is nil, and returns the connection to use next (nil when it ended).
func keepAliveRequest(addr string, c *keepAliveConn) (next *keepAliveConn, a HTTPAttempt) {
	a.Dialed = time.Now()
	defer func() { a.Ended = time.Now() }()
	if c == nil {
		conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			a.Outcome = dialOutcome(err)
			return nil, a
		}
		a.Connected = time.Now()
		c = &keepAliveConn{conn: conn, r: bufio.NewReader(conn)}
	}
	fail := func(err error) (*keepAliveConn, HTTPAttempt) {
		c.conn.Close()
		switch {
		case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF):
			a.Outcome = "reset"
		case errors.Is(err, os.ErrDeadlineExceeded):
			a.Outcome = "timeout"
		default:
			a.Outcome = "other: " + err.Error()
		}
		return nil, a
	}
	c.conn.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.WriteString(c.conn, "POST / HTTP/1.1\r\nHost: sigscope-test\r\nContent-Length: 0\r\n\r\n"); err != nil {
		return fail(err)
	}
	status, err := c.r.ReadString('\n')
	if err != nil {
		return fail(err)
	}
	if !strings.HasPrefix(status, "HTTP/1.1 200") {
		c.conn.Close()
		a.Outcome = fmt.Sprintf("other: %q", status)
		return nil, a
	}
	length, closing := 0, false
	for {
		h, err := c.r.ReadString('\n')
		if err != nil {
			return fail(err)
		}
		h = strings.TrimRight(h, "\r\n")
		if h == "" {
			break
		}
		name, value, _ := strings.Cut(h, ":")
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "content-length":
			fmt.Sscan(strings.TrimSpace(value), &length)
		case "connection":
			closing = strings.EqualFold(strings.TrimSpace(value), "close")
		}
	}
	if _, err := io.CopyN(io.Discard, c.r, int64(length)); err != nil {
		return fail(err)
	}
	a.Outcome = "ok"
	if closing {
		c.conn.Close()
		return nil, a
	}
	return c, a
}
