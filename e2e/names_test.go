package e2e

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sigscope/sigscope/internal/dockertest"
	"github.com/sigscope/sigscope/internal/testutil"
	"github.com/sigscope/sigscope/timeline"
)

// Names on a node that has run for a while (issue 28): a runtime API that
// is slow for a moment under load must not cost the names of the containers
// started during the next half minute, and a name that could not be learnt
// while the container ran is asked for again until it is.

// stallProxy forwards a unix socket to Docker's, and holds every byte that
// clients send while a stall is on: requests in flight and new ones alike
// wait until it ends, as on a daemon too busy to answer.
type stallProxy struct {
	path, to string
	ln       net.Listener

	mu    sync.Mutex
	until time.Time
	held  int // requests held by a stall
}

func newStallProxy(t *testing.T, to string) *stallProxy {
	t.Helper()
	p := &stallProxy{path: filepath.Join(t.TempDir(), "docker.sock"), to: to}
	ln, err := net.Listen("unix", p.path)
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

func (p *stallProxy) serve(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("unix", p.to)
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

// stall holds what clients send for d from now on.
func (p *stallProxy) stall(d time.Duration) {
	p.mu.Lock()
	p.until = time.Now().Add(d)
	p.mu.Unlock()
}

func (p *stallProxy) heldRequests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// namedContainer is a container the test started, as Docker names it.
type namedContainer struct{ name, id string }

// startNamed starts a busybox container whose PID 1 exits on SIGTERM.
func startNamed(t *testing.T, d *dockertest.Daemon, img, name string) namedContainer {
	t.Helper()
	_, _ = d.DockerErr("rm", "-f", name)
	out, err := d.DockerErr("run", "-d", "--network", "none", "--name", name, img, "sh", "-c", "trap 'exit 3' TERM; sleep 1000 & wait")
	if err != nil {
		t.Fatalf("docker run %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() { _, _ = d.DockerErr("rm", "-f", name) })
	return namedContainer{name: name, id: strings.TrimSpace(out)}
}

// checkNamed waits for each container's episode and checks its identity:
// the container's name and image, as Docker gave them, and no note that the
// name is missing.
func checkNamed(t *testing.T, base, img string, ctrs []namedContainer) {
	t.Helper()
	for _, c := range ctrs {
		ep := faultWaitEpisode(t, base, c.id)
		if ep.Container.Name != c.name || ep.Container.Image != img || ep.Container.Runtime != "docker" || ep.Outcome != timeline.OutcomeGraceful {
			t.Errorf("container %s (%.12s): episode names %q, image %q, runtime %q, outcome %s (want %q, %q, docker, graceful); identity note %q",
				c.name, c.id, ep.Container.Name, ep.Container.Image, ep.Container.Runtime, ep.Outcome, c.name, img, ep.Container.NameUnknown)
		}
		if ep.Container.NameUnknown != "" {
			t.Errorf("container %s: named, yet the episode says %q", c.name, ep.Container.NameUnknown)
		}
	}
}

// The Docker API stalls for 3 s (longer than the agent's 2 s API timeout)
// while containers start, then answers again at once. The containers
// started during the stall, and those started in the 30 s after it, are
// named in their stop's episodes: the agent asks again once Docker
// answers, instead of holding the endpoint down for 30 s and keeping the
// bare identity it had.
func TestNamesThroughRuntimeStall(t *testing.T) {
	testutil.RequirePrivileged(t)
	img := busyboxImage(t)
	d := dockertest.EnsureDaemon(t)
	proxy := newStallProxy(t, d.Socket)
	port, agentErr := startServe(t, "--docker-socket", proxy.path)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(t, base+"/readyz")
	tag := fmt.Sprint(time.Now().UnixNano() % 1e6)

	proxy.stall(3 * time.Second)
	var ctrs []namedContainer
	for i := range 3 {
		ctrs = append(ctrs, startNamed(t, d, img, fmt.Sprintf("stall-%s-during-%d", tag, i)))
	}
	// Past the stall, well within the 30 s a failed endpoint used to be
	// left alone.
	for time.Now().Before(proxy.until) {
		time.Sleep(100 * time.Millisecond)
	}
	for i := range 3 {
		ctrs = append(ctrs, startNamed(t, d, img, fmt.Sprintf("stall-%s-after-%d", tag, i)))
	}
	held := proxy.heldRequests()
	if held == 0 {
		t.Fatal("the stall held no request of the agent: the test did not test anything")
	}
	time.Sleep(3 * time.Second)
	args := []string{"stop", "-t", "5"}
	for _, c := range ctrs {
		args = append(args, c.name)
	}
	if out, err := d.DockerErr(args...); err != nil {
		t.Fatalf("docker stop: %v\n%s", err, out)
	}
	checkNamed(t, base, img, ctrs)
	t.Logf("names: %d containers, %d agent requests held by the 3 s stall", len(ctrs), held)
	if t.Failed() {
		t.Logf("agent:\n%s", tail(agentErr.String()))
	}
}
