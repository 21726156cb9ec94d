// A pool of persistent HTTP/1.1 connections, as Go programs keep them
// (test/e2e/clientshapes_test.go): --workers goroutines POST through one
// net/http Transport that keeps up to --workers idle connections to the
// host (MaxIdleConnsPerHost), each request --think-ms after the last
// answer, 5 ms after a failure. With --unix, the Transport dials that unix
// socket (nginx's, for the proxy shape) whatever the URL's host.
//
// The Transport retries a request by itself, on a new connection, when a
// reused one fails (persistConn.shouldRetryRequest in net/http's
// transport.go): always when nothing of it was written and it has no body
// (outgoingLength 0) or a body it can rewind (GetBody set); otherwise only
// when it is replayable (Request.isReplayable: GET, HEAD, OPTIONS or TRACE,
// or an Idempotency-Key or X-Idempotency-Key header, and no body or one
// with GetBody) and the failure is the server's closing of an idle
// connection or a read error. So each request here is a POST with a
// one-byte body the Transport cannot rewind: an io.NopCloser (which
// http.NewRequest does not recognise, so it sets no GetBody; ContentLength
// set by hand) and no idempotency header. Such a request is never
// replayable and never retried: each failure the caller sees is one
// request failed, and a request that reached the server was sent once.
//
// Without the retry, the Transport also fails a request it never sent:
// one it handed a kept connection whose server's FIN its reader saw at
// that moment ("http: server closed idle connection", or EOF once the
// request was the connection's: a nothingWrittenError either way).
// Nothing of such a request reached the server: no
// count of the server's can see it (a rewindable body would have had it
// sent again on a new connection). Each connection counts the bytes
// written on it, so that a failed request is told "unsent" (none of its
// bytes were written) from "broken" (some were).
//
// The same output as pool.py: one JSON line per request on stdout as it
// ends ({"w", "id", "start_us", "end_us", "outcome", "reused", "wrote",
// "err"}: reused, the Transport's connection was kept from before; wrote,
// the Transport wrote the whole request), and when stdin ends, once every
// worker has finished its request, the tally:
// {"tally": {"ok": n, "broken": n, "refused": n, "unsent": n, "other": n}}.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type line struct {
	W       int    `json:"w"`
	ID      string `json:"id"`
	StartUs int64  `json:"start_us"`
	EndUs   int64  `json:"end_us"`
	Outcome string `json:"outcome"`
	Reused  bool   `json:"reused"`
	Wrote   bool   `json:"wrote"`
	Err     string `json:"err,omitempty"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "the server's address")
	unix := flag.String("unix", "", "dial this unix socket instead of addr")
	workers := flag.Int("workers", 8, "workers, and idle connections kept")
	thinkMs := flag.Float64("think-ms", 20, "the pause after an answer")
	flag.Parse()

	var d net.Dialer
	tr := &http.Transport{
		MaxIdleConnsPerHost: *workers,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if *unix != "" {
				network, addr = "unix", *unix
			}
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &countConn{Conn: c}, nil
		},
	}
	client := &http.Client{Transport: tr, Timeout: 15 * time.Second}

	var (
		mu    sync.Mutex
		tally = map[string]int{"ok": 0, "broken": 0, "refused": 0, "unsent": 0, "other": 0}
		out   = json.NewEncoder(os.Stdout)
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	think := time.Duration(*thinkMs * float64(time.Millisecond))
	for w := range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; !stop.Load(); n++ {
				l := request(client, *addr, w, n)
				mu.Lock()
				tally[l.Outcome]++
				out.Encode(l)
				mu.Unlock()
				if l.Outcome == "ok" {
					time.Sleep(think)
				} else {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	io.Copy(io.Discard, os.Stdin)
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	out.Encode(map[string]any{"tally": tally})
	mu.Unlock()
}

// countConn is a connection that counts the bytes written on it.
type countConn struct {
	net.Conn
	written atomic.Int64
}

func (c *countConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

func request(client *http.Client, addr string, w, n int) (l line) {
	l.W, l.ID = w, fmt.Sprintf("%d-%d", w, n)
	l.StartUs = time.Now().UnixMicro()
	defer func() { l.EndUs = time.Now().UnixMicro() }()
	// The connection the Transport gave this request and its bytes
	// written before: one request at a time on each (HTTP/1.1).
	var (
		conn    *countConn
		written int64
	)
	trace := &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) {
			l.Reused = i.Reused
			conn, _ = i.Conn.(*countConn)
			if conn != nil {
				written = conn.written.Load()
			}
		},
		WroteRequest: func(i httptrace.WroteRequestInfo) { l.Wrote = i.Err == nil },
	}
	// Not rewindable: no GetBody (see the package comment).
	body := io.NopCloser(strings.NewReader("x"))
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace),
		"POST", fmt.Sprintf("http://%s/r/%s", addr, l.ID), body)
	if err != nil {
		l.Outcome, l.Err = "other", err.Error()
		return l
	}
	req.ContentLength = 1
	req.Header.Set("Content-Type", "text/plain")
	if req.GetBody != nil {
		panic("the request's body can be rewound: the Transport could retry it")
	}
	resp, err := client.Do(req)
	if err != nil {
		l.Err = err.Error()
		var ne net.Error
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			l.Outcome = "refused"
		case errors.As(err, &ne) && ne.Timeout():
			l.Outcome = "other"
		case conn != nil && conn.written.Load() == written:
			// Not a byte of it written: it never left this client.
			l.Outcome = "unsent"
		default:
			// Closed or reset before the answer (EOF, ECONNRESET, EPIPE,
			// "server closed idle connection"): a proxy's 502.
			l.Outcome = "broken"
		}
		return l
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		l.Outcome, l.Err = "broken", err.Error()
		return l
	}
	if resp.StatusCode != http.StatusOK {
		l.Outcome, l.Err = "other", fmt.Sprintf("status %d", resp.StatusCode)
		return l
	}
	l.Outcome = "ok"
	return l
}
