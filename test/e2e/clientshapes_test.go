package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/dockertest"
	"github.com/sigscope/sigscope/test/testutil"
)

// TestStopTrafficClientShapes is TestStopTrafficKeepAlive with the
// keep-alive clients users run instead of a hand-written one, each in the
// stopped container's network namespace (nsenter -n: its processes stay
// in the test's cgroup), each server shape stopped under each (ka-closeidle,
// ka-drain, ka-exit), and the episode held to the clients' own count by
// the same rules:
//
//   - python: testdata/clients/pool.py, threads each keeping one
//     http.client.HTTPConnection, which never retries;
//   - go: testdata/clients/pool.go, a net/http Transport keeping
//     MaxIdleConnsPerHost connections, its POSTs made never replayable (its
//     comment says why the Transport then never retries them); a request
//     the Transport failed before writing a byte of it ("unsent": it
//     handed out a kept connection as the server's FIN came) never
//     reached the server and is left out of the count, and logged;
//   - node: testdata/clients/pool.js, an http.Agent({keepAlive: true,
//     maxSockets}), which never retries;
//   - nginx: a reverse proxy keeping upstream connections to the server
//     (keepalive 16, HTTP/1.1, proxy_next_upstream off: a failed request is
//     never tried again, POST or not), driven by pool.go through a unix
//     socket (so that the driver's connections are no TCP of the
//     namespace's); the truth is nginx's own log of each request's status
//     and of its upstream error.
//
// Every request is a POST of one byte, 20 ms after the last answer on each
// of 8 workers, and each line the clients print names the request (its
// path, for nginx's log). The clients, nginx included, are in the
// namespace but not in the container's cgroup: their refused connects
// are the namespace's own (self_refused), given back to refused as
// another cgroup's; the log shows both.
//
// Python's drain is undecided, not clean: http.client writes a POST's
// headers and its body in two sends (TCP_NODELAY: two segments), and the
// body can come after the server's answer; Go's server, answering with
// Connection: close before reading the body, reads it after its answer,
// then closes. The kernel sees the client speak last before the FIN, and
// cannot tell a request's rest from a new request: data that came within
// tracer.CrossWindow of the answer is undecided (possibly lost), never a
// request lost (kaCase.crossesAnswer).
func TestStopTrafficClientShapes(t *testing.T) {
	img := trafficImage(t)
	node, python := dockertest.NodeJS(), dockertest.Python3()
	dockertest.EnsureHostRuntimes(t, node, python)
	dir := t.TempDir()
	goPool := filepath.Join(dir, "pool")
	build := exec.Command("go", "build", "-o", goPool, filepath.Join("testdata", "clients", "pool.go"))
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build testdata/clients/pool.go: %v\n%s", err, out)
	}
	script := func(name string) string {
		p, err := filepath.Abs(filepath.Join("testdata", "clients", name))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	poolArgs := []string{"--workers", "8", "--think-ms", "20"}
	inNetNS := func(pid int, argv ...string) []string {
		return append([]string{"nsenter", "-t", strconv.Itoa(pid), "-n", "--"}, argv...)
	}
	for _, shape := range []struct {
		name          string
		crossesAnswer bool
		start         func(t *testing.T, pid int) kaClients
	}{
		{"python", true, func(t *testing.T, pid int) kaClients {
			return startPool(t, "pool.py", inNetNS(pid, append([]string{python.Path, script("pool.py"), "--addr", "127.0.0.1:8080"}, poolArgs...)...))
		}},
		{"go", false, func(t *testing.T, pid int) kaClients {
			return startPool(t, "pool.go", inNetNS(pid, append([]string{goPool, "--addr", "127.0.0.1:8080"}, poolArgs...)...))
		}},
		{"node", false, func(t *testing.T, pid int) kaClients {
			return startPool(t, "pool.js", inNetNS(pid, append([]string{node.Path, script("pool.js"), "--addr", "127.0.0.1:8080"}, poolArgs...)...))
		}},
		{"nginx", false, func(t *testing.T, pid int) kaClients {
			return startNginxShape(t, pid, inNetNS, append([]string{goPool}, poolArgs...))
		}},
	} {
		t.Run(shape.name, func(t *testing.T) {
			if shape.name == "nginx" {
				nginxBinary(t) // skips (or fails) before any container starts
			}
			for _, tc := range kaCases {
				tc.crossesAnswer = shape.crossesAnswer
				t.Run(tc.mode, func(t *testing.T) {
					stopKeepAlive(t, img, "e2e-shapes-"+shape.name+"-"+tc.mode, tc, shape.start)
				})
			}
		})
	}
}

// poolLine is a line of a pool client's output (testdata/clients): one
// request, or the tally at the end.
type poolLine struct {
	W       int    `json:"w"`
	ID      string `json:"id"`
	StartUs int64  `json:"start_us"`
	EndUs   int64  `json:"end_us"`
	Outcome string `json:"outcome"` // ok, broken, refused, other; pool.go's unsent
	Reused  bool   `json:"reused"`
	Wrote   *bool  `json:"wrote"` // pool.go's only: the Transport wrote it whole
	Err     string `json:"err"`

	Tally map[string]int `json:"tally"`
}

// poolClient is a running pool client: its requests' lines as they come,
// and its tally once its stdin was closed.
type poolClient struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr testutil.SyncBuffer
	done   chan struct{} // stdout read to its end

	mu    sync.Mutex
	lines []poolLine
	tally map[string]int
	bad   []string // lines that did not parse

	stopOnce, attemptsOnce sync.Once
	attempts               []testutil.HTTPAttempt // stop's
}

func startPool(t *testing.T, name string, argv []string) *poolClient {
	t.Helper()
	c := &poolClient{name: name, cmd: exec.Command(argv[0], argv[1:]...), done: make(chan struct{})}
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stderr = &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l poolLine
			err := json.Unmarshal(sc.Bytes(), &l)
			c.mu.Lock()
			switch {
			case err != nil:
				c.bad = append(c.bad, sc.Text())
			case l.Tally != nil:
				c.tally = l.Tally
			default:
				c.lines = append(c.lines, l)
			}
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *poolClient) waitAnswered(t *testing.T) {
	t.Helper()
	testutil.WaitFor(t, "an answer to "+c.name, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return slices.ContainsFunc(c.lines, func(l poolLine) bool { return l.Outcome == "ok" })
	})
}

// finish closes the client's stdin (each worker ends its request, then
// the client prints its tally and exits), waits for it (killing it after
// testutil.Bound), and checks that its tally is its lines' count.
func (c *poolClient) finish(t *testing.T) []poolLine {
	t.Helper()
	c.stopOnce.Do(func() {
		c.stdin.Close()
		exited := make(chan error, 1)
		go func() { <-c.done; exited <- c.cmd.Wait() }()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("%s: %v\n%s", c.name, err, c.stderr.String())
			}
		case <-time.After(testutil.Bound):
			c.cmd.Process.Kill()
			<-exited
			t.Errorf("%s did not end within %v of its stdin's end\n%s", c.name, testutil.Bound, c.stderr.String())
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		count := map[string]int{}
		for _, l := range c.lines {
			count[l.Outcome]++
		}
		if len(c.bad) > 0 {
			t.Errorf("%s printed lines that do not parse: %q", c.name, c.bad)
		}
		for k, n := range c.tally {
			if count[k] != n {
				t.Errorf("%s: tally %v, its lines %v", c.name, c.tally, count)
				break
			}
		}
		if c.tally == nil {
			t.Errorf("%s printed no tally\n%s", c.name, c.stderr.String())
		}
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lines
}

func (c *poolClient) stop(t *testing.T) []testutil.HTTPAttempt {
	t.Helper()
	c.attemptsOnce.Do(func() {
		lines := c.finish(t)
		logPoolFailures(t, c.name, lines, nil)
		for _, l := range lines {
			// pool.go's request that failed before a byte of it was
			// written: only on a connection the Transport kept, whose
			// server's close its reader saw as it handed it out ("server
			// closed idle connection", or EOF once it was this request's).
			if l.Outcome == "unsent" && !l.Reused {
				t.Errorf("%s: request %s failed unsent on a new connection: %s", c.name, l.ID, l.Err)
			}
		}
		c.attempts = poolAttempts(lines, nil)
	})
	return c.attempts
}

// poolAttempts are a pool client's requests as the tests' attempts: ok,
// reset (broken), refused, "other: ..."; outcome, when not nil, gives a
// request's outcome by its id instead (nginx's). A request that failed
// unsent (pool.go's: not a byte of it was written) is left out: it never
// reached the server, and no count of the server's kernel can see it
// (logPoolFailures names them).
func poolAttempts(lines []poolLine, outcome func(poolLine) string) []testutil.HTTPAttempt {
	var as []testutil.HTTPAttempt
	for _, l := range lines {
		a := testutil.HTTPAttempt{Dialed: time.UnixMicro(l.StartUs), Ended: time.UnixMicro(l.EndUs)}
		o := l.Outcome
		if outcome != nil {
			o = outcome(l)
		}
		switch o {
		case "unsent":
			continue
		case "ok", "refused":
			a.Outcome = o
		case "broken":
			a.Outcome = "reset"
		default:
			a.Outcome = "other: " + o + " " + l.Err
		}
		as = append(as, a)
	}
	return as
}

// errNoise is what differs between two errors of the same kind: the
// request's path, ports, nginx's connection number.
var errNoise = regexp.MustCompile(`/r/[0-9-]+|:[0-9]{4,5}\b|\*[0-9]+ `)

// logPoolFailures logs the failed requests by their error, and how many
// were sent on a connection kept from before (and, pool.go's, how many
// were written whole): a request that failed before any of it was
// written never reached the server, and no kernel count can see it.
func logPoolFailures(t *testing.T, name string, lines []poolLine, outcome func(poolLine) string) {
	t.Helper()
	type key struct{ outcome, err string }
	byErr := map[key]int{}
	reused, notWritten := 0, 0
	var fresh []string // broken on a new connection: rare, each worth reading
	for _, l := range lines {
		o := l.Outcome
		if outcome != nil {
			o = outcome(l)
		}
		if o == "ok" {
			continue
		}
		e := errNoise.ReplaceAllString(l.Err, "")
		byErr[key{o, e}]++
		if o == "broken" {
			if l.Reused {
				reused++
			} else if len(fresh) < 5 {
				fresh = append(fresh, fmt.Sprintf("%s at %s: %s", l.ID, time.UnixMicro(l.StartUs).UTC().Format(time.RFC3339Nano), l.Err))
			}
			if l.Wrote != nil && !*l.Wrote {
				notWritten++
			}
		}
	}
	var parts []string
	for k, n := range byErr {
		parts = append(parts, fmt.Sprintf("%d %s (%s)", n, k.outcome, k.err))
	}
	sort.Strings(parts)
	t.Logf("%s: %d requests; failures: %s; broken on a reused connection: %d, not written whole: %d",
		name, len(lines), strings.Join(parts, "; "), reused, notWritten)
	if len(fresh) > 0 {
		t.Logf("%s: broken on a new connection: %s", name, strings.Join(fresh, "; "))
	}
}

// nginxBinary is Debian's nginx (.ci/run installs it); it skips the test
// when missing, or fails it when SIGSCOPE_REQUIRE_PRIVILEGED=1.
func nginxBinary(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/sbin/nginx"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	const why = "nginx not found: the reverse proxy shape needs Debian's nginx (apt-get install nginx; .ci/run installs it)"
	if os.Getenv("SIGSCOPE_REQUIRE_PRIVILEGED") == "1" {
		t.Fatal(why + ", and SIGSCOPE_REQUIRE_PRIVILEGED=1")
	}
	t.Skip(why)
	return ""
}

// nginxConf is the proxy's configuration: one worker, listening on a unix
// socket, keeping up to 16 idle HTTP/1.1 connections to the server
// (keepalive, proxy_http_version 1.1 and an empty Connection header: what
// upstream keep-alive takes), never trying a request again
// (proxy_next_upstream off; a POST on a cached connection would not be
// either: non_idempotent is not set), and never marking the server down
// (max_fails=0: each request tries it). The access log has each request's
// path and status, the error log each upstream error with the request.
const nginxConf = `worker_processes 1;
daemon off;
user root;
pid {{dir}}/nginx.pid;
error_log {{dir}}/error.log error;
events { worker_connections 512; }
http {
	log_format shapes '$request_uri $status $upstream_status';
	access_log {{dir}}/access.log shapes;
	client_body_temp_path {{dir}}/body;
	proxy_temp_path {{dir}}/proxy;
	fastcgi_temp_path {{dir}}/fastcgi;
	uwsgi_temp_path {{dir}}/uwsgi;
	scgi_temp_path {{dir}}/scgi;
	upstream app {
		server 127.0.0.1:8080 max_fails=0;
		keepalive 16;
	}
	server {
		listen unix:{{dir}}/nginx.sock;
		location / {
			proxy_pass http://app;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_next_upstream off;
		}
	}
}
`

// nginxShape is nginx in the container's network namespace, in front of
// its server, and pool.go driving it.
type nginxShape struct {
	dir    string
	nginx  *exec.Cmd
	stderr testutil.SyncBuffer
	exited chan error
	driver *poolClient

	once, nginxOnce sync.Once
	attempts        []testutil.HTTPAttempt
}

func startNginxShape(t *testing.T, pid int, inNetNS func(int, ...string) []string, driver []string) kaClients {
	t.Helper()
	bin := nginxBinary(t)
	// Short: a unix socket's path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "sigscope-nginx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(strings.ReplaceAll(nginxConf, "{{dir}}", dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	n := &nginxShape{dir: dir, exited: make(chan error, 1)}
	argv := inNetNS(pid, bin, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "startup.log"))
	n.nginx = exec.Command(argv[0], argv[1:]...)
	n.nginx.Stdout, n.nginx.Stderr = &n.stderr, &n.stderr
	if err := n.nginx.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.exited <- n.nginx.Wait() }()
	t.Cleanup(func() { n.stopNginx(t) })
	sock := filepath.Join(dir, "nginx.sock")
	testutil.WaitFor(t, "nginx listening on "+sock, func() bool {
		select {
		case err := <-n.exited:
			n.exited <- err
			startup, _ := os.ReadFile(filepath.Join(dir, "startup.log"))
			errs, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx ended: %v\n%s%s%s", err, n.stderr.String(), startup, errs)
		default:
		}
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	n.driver = startPool(t, "nginx (pool.go)", append(append([]string(nil), driver...), "--unix", sock, "--addr", "nginx"))
	return n
}

func (n *nginxShape) waitAnswered(t *testing.T) { n.driver.waitAnswered(t) }

// stopNginx ends nginx gracefully (SIGQUIT: it finishes what is in
// flight), or kills it after testutil.Bound.
func (n *nginxShape) stopNginx(t *testing.T) {
	t.Helper()
	n.nginxOnce.Do(func() {
		n.nginx.Process.Signal(syscall.SIGQUIT)
		select {
		case err := <-n.exited:
			if err != nil {
				t.Errorf("nginx: %v\n%s", err, n.stderr.String())
			}
		case <-time.After(testutil.Bound):
			n.nginx.Process.Kill()
			t.Errorf("nginx did not end within %v of its SIGQUIT", testutil.Bound)
		}
	})
}

// nginxErrorLine is an upstream error in nginx's error log, with the
// request it failed.
var nginxErrorLine = regexp.MustCompile(`\[error\] [0-9#]+: \*[0-9]+ (.*?), client: .*, request: "POST /r/([0-9-]+) HTTP/1\.1"`)

// stop ends the driver, then nginx, and returns the driver's requests
// with the outcomes nginx logged: ok for its 200s, and for its 502s what
// its error log says of the upstream: refused when the connect was
// refused, broken otherwise (the server closed the connection or reset it
// before answering). The driver's own view (200 or 502) must be nginx's.
func (n *nginxShape) stop(t *testing.T) []testutil.HTTPAttempt {
	t.Helper()
	n.once.Do(func() {
		lines := n.driver.finish(t)
		n.stopNginx(t)
		access, err := os.ReadFile(filepath.Join(n.dir, "access.log"))
		if err != nil {
			t.Fatal(err)
		}
		errLog, err := os.ReadFile(filepath.Join(n.dir, "error.log"))
		if err != nil {
			t.Fatal(err)
		}
		status := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(access)), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 || !strings.HasPrefix(f[0], "/r/") {
				t.Errorf("nginx access log line %q", l)
				continue
			}
			status[strings.TrimPrefix(f[0], "/r/")] = f[1]
		}
		upstream := map[string]string{}
		var unmatched []string
		for _, l := range strings.Split(strings.TrimSpace(string(errLog)), "\n") {
			m := nginxErrorLine.FindStringSubmatch(l)
			switch {
			case l == "":
			case m == nil:
				unmatched = append(unmatched, l)
			case upstream[m[2]] != "":
				t.Errorf("nginx logged two errors for request %s: %q, then %q", m[2], upstream[m[2]], m[1])
			default:
				upstream[m[2]] = m[1]
			}
		}
		if len(unmatched) > 0 {
			t.Errorf("nginx's error log has lines of no request: %q", unmatched)
		}
		outcome := func(l poolLine) string {
			switch s := status[l.ID]; {
			case s == "200":
				return "ok"
			case s == "502" && strings.Contains(upstream[l.ID], "(111: Connection refused)"):
				return "refused"
			case s == "502" && upstream[l.ID] != "":
				return "broken"
			case s == "":
				return "not in nginx's access log"
			default:
				return "status " + s + " " + upstream[l.ID]
			}
		}
		for i := range lines {
			l := &lines[i]
			want := "other"
			if status[l.ID] == "200" {
				want = "ok"
			}
			if l.Outcome != want || l.Outcome == "other" && l.Err != "status "+status[l.ID] {
				t.Errorf("the driver's request %s: %s %s; nginx logged %q", l.ID, l.Outcome, l.Err, status[l.ID])
			}
			l.Err = upstream[l.ID]
		}
		if len(status) != len(lines) {
			t.Errorf("nginx logged %d requests, the driver made %d", len(status), len(lines))
		}
		logPoolFailures(t, "nginx", lines, outcome)
		n.attempts = poolAttempts(lines, outcome)
	})
	return n.attempts
}
