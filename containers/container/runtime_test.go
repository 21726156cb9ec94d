package container

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// socketPath returns a unix socket path short enough for sun_path (108
// bytes), which a nested t.TempDir may exceed.
func socketPath(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sigscope-sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, name)
}

// fakeDocker serves the two Docker Engine API calls the resolver makes.
type fakeDocker struct {
	socket     string
	mu         sync.Mutex
	containers map[string]map[string]any // id -> inspect JSON
	requests   atomic.Int64
	failing    atomic.Bool // answer 500
}

// set replaces what inspect answers for id (nil: no such container).
func (f *fakeDocker) set(id string, inspect map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.containers == nil {
		f.containers = make(map[string]map[string]any)
	}
	if inspect == nil {
		delete(f.containers, id)
		return
	}
	f.containers[id] = inspect
}

func startFakeDocker(t *testing.T, containers map[string]map[string]any) *fakeDocker {
	t.Helper()
	f := &fakeDocker{socket: socketPath(t, "docker.sock"), containers: containers}
	stop, _ := f.listen(t)
	t.Cleanup(stop)
	return f
}

// listen serves the API on a new socket file at f.socket (replacing a
// stale one, as dockerd does) until stop, which removes the file as a
// daemon that stops cleanly does, or crash, which leaves it behind
// refusing connections.
func (f *fakeDocker) listen(t *testing.T) (stop, crash func()) {
	t.Helper()
	if err := os.Remove(f.socket); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", f.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(f.serve)}
	go srv.Serve(l)
	stop = func() { srv.Close() }
	crash = func() {
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		srv.Close()
	}
	return stop, crash
}

func (f *fakeDocker) serve(w http.ResponseWriter, req *http.Request) {
	f.requests.Add(1)
	if f.failing.Load() {
		http.Error(w, `{"message":"daemon is sick"}`, http.StatusInternalServerError)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.URL.Path == "/containers/json" {
		var list []map[string]any
		for id := range f.containers {
			list = append(list, map[string]any{"Id": id})
		}
		json.NewEncoder(w).Encode(list)
		return
	}
	id, ok := strings.CutPrefix(req.URL.Path, "/containers/")
	id, ok2 := strings.CutSuffix(id, "/json")
	c := f.containers[id]
	if !ok || !ok2 || c == nil {
		http.Error(w, `{"message":"No such container: `+id+`"}`, http.StatusNotFound)
		return
	}
	json.NewEncoder(w).Encode(c)
}

func dockerInspectJSON(id, name string, labels map[string]string, stopSignal string, stopTimeout any, pid int) map[string]any {
	cfg := map[string]any{"Image": "sigscope-test:latest", "Labels": labels, "StopSignal": stopSignal}
	if stopTimeout != nil {
		cfg["StopTimeout"] = stopTimeout
	}
	return map[string]any{"Id": id, "Name": "/" + name, "Config": cfg, "State": map[string]any{"Running": true, "Pid": pid}}
}

func TestDockerEnrichment(t *testing.T) {
	h := newFakeHost(t)
	d := startFakeDocker(t, map[string]map[string]any{
		id1: dockerInspectJSON(id1, "web\x1b[31m", map[string]string{
			LabelPodName:          "web-0",
			LabelPodNamespace:     "shop",
			LabelPodUID:           uid,
			AnnotationGracePeriod: "45",
			"other":               "x",
		}, "TERM", 7, 1234),
	})
	const ttl = time.Minute
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}, TTL: ttl})
	p := h.dockerProcess(100, 4026532100, id1)
	info := r.Lookup(p)
	want := identity.Info{Identity: identity.Identity{ID: id1, Runtime: RuntimeDocker, Name: "web\x1b[31m", Image: "sigscope-test:latest", Pod: "web-0", Namespace: "shop", PodUID: uid}, StopSignal: sigvocab.SIGTERM, StopTimeout: 7, GracePeriod: 45, MainPID: 1234}
	if info == nil {
		t.Fatal("no Info")
	}
	got := *info
	got.Labels = nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Info =\n %+v\nwant\n %+v", got, want)
	}
	if info.Labels["other"] != "x" {
		t.Fatalf("labels %v", info.Labels)
	}
	// A second key of the same container (a process in a nested pid
	// namespace) needs a /proc read but no API call: metadata is cached
	// per container.
	other := *p
	other.PID, other.PidNS = 101, 4026532101
	h.addProcess(101, 4026532101, "0::/docker/"+id1+"\n")
	if r.Lookup(&other) != info {
		t.Fatal("same container, different Info")
	}
	if n := d.requests.Load(); n != 1 {
		t.Fatalf("%d API calls, want 1 per container per TTL", n)
	}
	// After the TTL: asked again, once.
	h.clock.advance(ttl + time.Second)
	r.Lookup(p)
	r.Lookup(&other)
	if n := d.requests.Load(); n != 2 {
		t.Fatalf("%d API calls after the TTL, want 2", n)
	}
	if len(r.Errors()) != 0 {
		t.Fatalf("errors %v", r.Errors())
	}
}

func TestDockerDefaults(t *testing.T) {
	h := newFakeHost(t)
	d := startFakeDocker(t, map[string]map[string]any{id1: dockerInspectJSON(id1, "plain", nil, "", nil, 5)})
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}})
	info := r.Lookup(h.dockerProcess(100, 4026532100, id1))
	if info.Name != "plain" || info.StopSignal != 0 || info.StopTimeout != dockerDefaultStopTimeout || info.Pod != "" || info.GracePeriod != 0 {
		t.Fatalf("Info %+v: want no stop signal (runtime default), docker's default timeout, no pod", info)
	}
}

// TestDockerNegativePid: Docker's inspect can say "Pid": -1; that is no main
// process (0), never a pid to match or signal.
func TestDockerNegativePid(t *testing.T) {
	var ins dockerInspect
	if err := json.Unmarshal([]byte(`{"Id":"`+id1+`","Name":"/x","State":{"Status":"created","Pid":-1}}`), &ins); err != nil {
		t.Fatal(err)
	}
	if info := ins.info(); info.MainPID != 0 {
		t.Fatalf("MainPID %d, want 0", info.MainPID)
	}
	if !ins.notStarted() {
		t.Fatal("a created container with pid -1 is not started")
	}
}

func TestDockerNotFoundIsNotAnError(t *testing.T) {
	h := newFakeHost(t)
	d := startFakeDocker(t, nil)
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}})
	info := r.Lookup(h.dockerProcess(100, 4026532100, id1))
	if info == nil || info.ID != id1 || info.Name != "" {
		t.Fatalf("Info %+v", info)
	}
	if len(r.Errors()) != 0 {
		t.Fatalf("errors %v", r.Errors())
	}
}

func TestDockerUnreachable(t *testing.T) {
	h := newFakeHost(t)
	r := h.resolver(Options{DockerSocket: filepath.Join(t.TempDir(), "nothing.sock"), CRISockets: []string{}})
	for i := 0; i < 5; i++ {
		id := strings.Repeat(string("abcde"[i]), 64)
		info := r.Lookup(h.dockerProcess(uint32(100+i), uint32(4026532100+i), id))
		if info == nil || info.ID != id || info.Runtime != RuntimeDocker {
			t.Fatalf("Info %+v: the ID and runtime must come from the cgroup path", info)
		}
		h.clock.advance(time.Minute) // past the retry interval: each one is tried
	}
	if n := r.Errors()[SourceDocker]; n != 5 {
		t.Fatalf("docker errors %d, want 5", n)
	}
	logs := h.logs.String()
	if n := strings.Count(logs, "level=WARN"); n != 1 {
		t.Fatalf("%d warnings for one outage, want 1:\n%s", n, logs)
	}
}

// A runtime that fails is not asked again for the retry interval: a hung
// daemon costs one timeout, not one per new container.
func TestDockerBackoff(t *testing.T) {
	h := newFakeHost(t)
	d := startFakeDocker(t, map[string]map[string]any{id1: dockerInspectJSON(id1, "one", nil, "", nil, 1)})
	d.failing.Store(true)
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}})
	p := h.dockerProcess(100, 4026532100, id1)
	if info := r.Lookup(p); info == nil || info.Name != "" {
		t.Fatalf("Info %+v", info)
	}
	q := h.dockerProcess(101, 4026532101, id2)
	if info := r.Lookup(q); info == nil || info.ID != id2 {
		t.Fatalf("Info %+v", info)
	}
	if n := d.requests.Load(); n != 1 {
		t.Fatalf("%d requests within the retry interval, want 1", n)
	}

	// It recovers; after the interval a hit re-enriches in the background.
	d.failing.Store(false)
	h.clock.advance(r.retryInterval + time.Second)
	r.Lookup(p)
	testutil.WaitFor(t, "the metadata after the runtime recovered", func() bool { return r.Lookup(p).Name == "one" })
	if !strings.Contains(h.logs.String(), "answers again") {
		t.Fatalf("no recovery message:\n%s", h.logs.String())
	}
}

func TestListRunningDockerAndErrors(t *testing.T) {
	h := newFakeHost(t)
	d := startFakeDocker(t, map[string]map[string]any{
		id1: dockerInspectJSON(id1, "b", nil, "SIGQUIT", nil, 11),
		id2: dockerInspectJSON(id2, "a", nil, "", 3, 12),
	})
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}})
	runs, err := r.ListRunning(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Info.Name != "a" || runs[0].PID != 12 || runs[1].Info.StopSignal != sigvocab.SIGQUIT || runs[1].PID != 11 {
		t.Fatalf("ListRunning = %+v", runs)
	}
	// ListRunning filled the metadata cache: a lookup asks nothing more.
	before := d.requests.Load()
	if info := r.Lookup(h.dockerProcess(100, 4026532100, id1)); info.Name != "b" {
		t.Fatalf("Info %+v", info)
	}
	if d.requests.Load() != before {
		t.Fatal("lookup after ListRunning called the API")
	}

	d.failing.Store(true)
	if _, err := r.ListRunning(context.Background()); err == nil {
		t.Fatal("a failing daemon must be an error")
	}
	none := h.resolver(Options{DockerSocket: filepath.Join(t.TempDir(), "none.sock"), CRISockets: []string{}})
	if _, err := none.ListRunning(context.Background()); err == nil || !strings.Contains(err.Error(), "no container runtime") {
		t.Fatalf("no runtime: err = %v", err)
	}
}

// The kubelet's preStop annotation, each handler kind; anything else is none.
func TestParseHook(t *testing.T) {
	for in, want := range map[string]*identity.Hook{
		`{"exec":{"command":["sleep","3"]}}`:                 {Kind: "exec", Command: []string{"sleep", "3"}},
		`{"httpGet":{"path":"/quit","port":8080}}`:           {Kind: "http", URL: ":8080/quit"},
		`{"httpGet":{"path":"/q","port":"http","host":"a"}}`: {Kind: "http", URL: "a:http/q"},
		`{"sleep":{"seconds":5}}`:                            {Kind: "sleep", Seconds: 5},
		``:                                                   nil,
		`{"tcpSocket":{"port":1}}`:                           nil,
		`{not json`:                                          nil,
	} {
		got := ParseHook(in)
		if (got == nil) != (want == nil) || got != nil && (got.Kind != want.Kind || got.URL != want.URL || got.Seconds != want.Seconds || strings.Join(got.Command, " ") != strings.Join(want.Command, " ")) {
			t.Errorf("ParseHook(%q) = %+v, want %+v", in, got, want)
		}
	}
}

// A hit whose enrichment failed earlier asks the runtime again in the
// background; Close waits for that request (bounded by APITimeout) instead
// of returning while it still talks to the runtime, and once closed no hit
// starts another.
func TestCloseWaitsForReenrichment(t *testing.T) {
	h := newFakeHost(t)
	d := startFakeDocker(t, map[string]map[string]any{id1: dockerInspectJSON(id1, "one", nil, "", nil, 1)})
	d.failing.Store(true)
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}, APITimeout: 10 * time.Second})
	p := h.dockerProcess(100, 4026532100, id1)
	if info := r.Lookup(p); info == nil || info.Name != "" {
		t.Fatalf("Info %+v", info)
	}
	d.failing.Store(false)
	d.mu.Lock() // the daemon answers nothing until released
	h.clock.advance(r.retryInterval + time.Second)
	before := d.requests.Load()
	r.Lookup(p) // starts the re-enrichment, which now waits on the daemon
	if !testutil.Poll(5*time.Millisecond, func() bool { return d.requests.Load() != before }) {
		d.mu.Unlock()
		t.Fatal("the hit asked nothing in the background")
	}
	closed := make(chan struct{})
	go func() { _ = r.Close(); close(closed) }()
	select {
	case <-closed:
		d.mu.Unlock()
		t.Fatal("Close returned while a re-enrichment was still asking the runtime")
	case <-time.After(300 * time.Millisecond):
	}
	d.mu.Unlock()
	select {
	case <-closed:
	case <-time.After(testutil.Bound):
		t.Fatal("Close did not return once the runtime answered")
	}
	n := d.requests.Load()
	h.clock.advance(r.retryInterval + time.Second)
	r.Lookup(p)
	time.Sleep(50 * time.Millisecond)
	if d.requests.Load() != n {
		t.Error("a hit after Close asked the runtime")
	}
}
