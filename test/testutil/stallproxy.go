package testutil

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// StallProxy forwards a unix socket to a runtime's (Docker's, a CRI
// runtime's), and holds every byte that clients send while a stall is on:
// requests in flight and new ones alike wait until it ends, as on a daemon
// too busy to answer. The runtime's own clients (the tests') go to it
// directly; the agent under test is given Path.
type StallProxy struct {
	Path, To string
	ln       net.Listener

	mu    sync.Mutex
	until time.Time
	held  int // requests held by a stall
}

// NewStallProxy listens on a new socket (short enough for sun_path) and
// forwards it to the socket to, until the test ends.
func NewStallProxy(t testing.TB, to string) *StallProxy {
	t.Helper()
	dir, err := os.MkdirTemp("", "sigscope-stall")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &StallProxy{Path: filepath.Join(dir, "runtime.sock"), To: to}
	ln, err := net.Listen("unix", p.Path)
	if err != nil {
		t.Fatal(err)
	}
	p.ln = ln
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *StallProxy) serve(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("unix", p.To)
	if err != nil {
		return
	}
	defer up.Close()
	go func() {
		_, _ = io.Copy(c, up)
		c.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			p.mu.Lock()
			wait := time.Until(p.until)
			if wait > 0 {
				p.held++
			}
			p.mu.Unlock()
			if wait > 0 {
				time.Sleep(wait)
			}
			if _, err := up.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Stall holds what clients send for d from now on.
func (p *StallProxy) Stall(d time.Duration) {
	p.mu.Lock()
	p.until = time.Now().Add(d)
	p.mu.Unlock()
}

// Until is when the stall ends (or ended).
func (p *StallProxy) Until() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.until
}

// HeldRequests is how many reads of clients' bytes a stall held.
func (p *StallProxy) HeldRequests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}
