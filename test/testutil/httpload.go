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
	l := &HTTPLoad{stop: make(chan struct{})}
	entered := make(chan error, workers)
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			if netnsOf != 0 {
				runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
				f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", netnsOf))
				if err == nil {
					err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
					f.Close()
				}
				if err != nil {
					entered <- fmt.Errorf("entering the network namespace of %d: %w", netnsOf, err)
					return
				}
			}
			entered <- nil
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				a := httpRequest(addr, dialTimeout)
				l.mu.Lock()
				l.attempts = append(l.attempts, a)
				l.mu.Unlock()
				if a.Outcome != "ok" {
					time.Sleep(5 * time.Millisecond) // a client retrying, not a flood
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

func httpRequest(addr string, dialTimeout time.Duration) (a HTTPAttempt) {
	a.Dialed = time.Now()
	defer func() { a.Ended = time.Now() }()
	conn, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil {
		var ne net.Error
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			a.Outcome = "refused"
		case errors.Is(err, syscall.ECONNRESET):
			// Established in the kernel (the server's accept queue),
			// then reset before connect() returned: the server died.
			a.Outcome = "reset"
		case errors.As(err, &ne) && ne.Timeout():
			a.Outcome = "timeout"
		default:
			a.Outcome = "other: " + err.Error()
		}
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
