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

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/sigscope/sigscope/internal/sigvocab"
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
	want := Info{ID: id1, Runtime: RuntimeDocker, Name: "web\x1b[31m", Image: "sigscope-test:latest",
		Pod: "web-0", Namespace: "shop", PodUID: uid, StopSignal: sigvocab.SIGTERM, StopTimeout: 7, GracePeriod: 45, MainPID: 1234}
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
	deadline := time.Now().Add(5 * time.Second)
	for r.Lookup(p).Name != "one" {
		if time.Now().After(deadline) {
			t.Fatal("metadata never arrived after the runtime recovered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(h.logs.String(), "answers again") {
		t.Fatalf("no recovery message:\n%s", h.logs.String())
	}
}

// fakeCRI is a CRI runtime service with a set of containers and pod
// sandboxes; set and setSandbox change them.
type fakeCRI struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	name      string
	statuses  map[string]*runtimeapi.ContainerStatusResponse
	sandboxes map[string]*runtimeapi.PodSandboxStatusResponse
	mu        sync.Mutex
	calls     int // ContainerStatus and PodSandboxStatus
}

func (f *fakeCRI) set(id string, resp *runtimeapi.ContainerStatusResponse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.statuses == nil {
		f.statuses = make(map[string]*runtimeapi.ContainerStatusResponse)
	}
	f.statuses[id] = resp
}

func (f *fakeCRI) setSandbox(id string, resp *runtimeapi.PodSandboxStatusResponse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sandboxes == nil {
		f.sandboxes = make(map[string]*runtimeapi.PodSandboxStatusResponse)
	}
	f.sandboxes[id] = resp
}

func startFakeCRI(t *testing.T, f *fakeCRI) string {
	t.Helper()
	sock := socketPath(t, "cri.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(s, f)
	go s.Serve(l)
	t.Cleanup(s.Stop)
	return sock
}

func (f *fakeCRI) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: f.name, RuntimeVersion: "test"}, nil
}

func (f *fakeCRI) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	f.mu.Lock()
	f.calls++
	resp := f.statuses[req.GetContainerId()]
	f.mu.Unlock()
	if resp == nil {
		return nil, status.Errorf(codes.NotFound, "container %q not found", req.GetContainerId())
	}
	if !req.GetVerbose() {
		resp = &runtimeapi.ContainerStatusResponse{Status: resp.Status}
	}
	return resp, nil
}

// PodSandboxStatus answers as containerd does: NotFound for a container's
// id, and the pause process's pid in the verbose info.
func (f *fakeCRI) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	f.mu.Lock()
	f.calls++
	resp := f.sandboxes[req.GetPodSandboxId()]
	f.mu.Unlock()
	if resp == nil {
		return nil, status.Errorf(codes.NotFound, "an error occurred when try to find sandbox %q: not found", req.GetPodSandboxId())
	}
	if !req.GetVerbose() {
		resp = &runtimeapi.PodSandboxStatusResponse{Status: resp.Status}
	}
	return resp, nil
}

func (f *fakeCRI) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*runtimeapi.Container
	for id, s := range f.statuses {
		if req.GetFilter().GetState() != nil && s.Status.GetState() != req.GetFilter().GetState().GetState() {
			continue
		}
		out = append(out, &runtimeapi.Container{Id: id, Labels: s.Status.Labels, Annotations: s.Status.Annotations})
	}
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}

// kubeletStatus is a ContainerStatus as containerd answers for a container
// the kubelet created.
func kubeletStatus(id string, state runtimeapi.ContainerState, pid int) *runtimeapi.ContainerStatusResponse {
	return &runtimeapi.ContainerStatusResponse{
		Status: &runtimeapi.ContainerStatus{
			Id:       id,
			Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: 0},
			State:    state,
			Image:    &runtimeapi.ImageSpec{Image: "registry.example/app:1.2"},
			ImageRef: "registry.example/app@sha256:abcd",
			Labels: map[string]string{
				LabelContainerName: "app",
				LabelPodName:       "app-7d9f-xk2",
				LabelPodNamespace:  "prod",
				LabelPodUID:        uid,
			},
			Annotations: map[string]string{
				"io.kubernetes.container.hash":         "1a2b",
				"io.kubernetes.container.restartCount": "0",
				AnnotationGracePeriod:                  "60",
			},
		},
		Info: map[string]string{"info": `{"sandboxID":"s","pid":` + itoa(pid) + `,"runtimeSpec":{}}`},
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestInfoFromCRI(t *testing.T) {
	for _, c := range []struct {
		name    string
		resp    *runtimeapi.ContainerStatusResponse
		want    Info
		created bool
	}{
		{"kubelet container", kubeletStatus(id1, runtimeapi.ContainerState_CONTAINER_RUNNING, 4242),
			Info{ID: id1, Name: "app", Image: "registry.example/app:1.2", Pod: "app-7d9f-xk2", Namespace: "prod", PodUID: uid, GracePeriod: 60, MainPID: 4242}, false},
		// ContainerStopSignals: containerd 2.4 reports the kubelet's
		// lifecycle.stopSignal, which it stops the container with.
		{"kubelet container with lifecycle.stopSignal", func() *runtimeapi.ContainerStatusResponse {
			r := kubeletStatus(id1, runtimeapi.ContainerState_CONTAINER_RUNNING, 4242)
			r.Status.StopSignal = runtimeapi.Signal_SIGNAL_SIGUSR1
			return r
		}(), Info{ID: id1, Name: "app", Image: "registry.example/app:1.2", Pod: "app-7d9f-xk2", Namespace: "prod", PodUID: uid, GracePeriod: 60, MainPID: 4242, StopSignal: sigvocab.SIGUSR1}, false},
		{"created, not started", kubeletStatus(id1, runtimeapi.ContainerState_CONTAINER_CREATED, 0),
			Info{ID: id1, Name: "app", Image: "registry.example/app:1.2", Pod: "app-7d9f-xk2", Namespace: "prod", PodUID: uid, GracePeriod: 60}, true},
		{"image by ref, stop signal, no verbose info", &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{
			Id: id2, Metadata: &runtimeapi.ContainerMetadata{Name: "side"}, ImageRef: "sha256:ff", State: runtimeapi.ContainerState_CONTAINER_EXITED,
			StopSignal: runtimeapi.Signal_SIGNAL_SIGQUIT,
		}}, Info{ID: id2, Name: "side", Image: "sha256:ff", StopSignal: sigvocab.SIGQUIT}, false},
		{"grace period as a label, garbage verbose info", &runtimeapi.ContainerStatusResponse{
			Status: &runtimeapi.ContainerStatus{Id: id2, State: runtimeapi.ContainerState_CONTAINER_RUNNING, Labels: map[string]string{AnnotationGracePeriod: "5"}},
			Info:   map[string]string{"info": "{not json"},
		}, Info{ID: id2, GracePeriod: 5}, false},
		{"bad grace period ignored", &runtimeapi.ContainerStatusResponse{
			Status: &runtimeapi.ContainerStatus{Id: id2, State: runtimeapi.ContainerState_CONTAINER_RUNNING, Annotations: map[string]string{AnnotationGracePeriod: "soon"}},
		}, Info{ID: id2}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := infoFromCRI(c.resp.GetStatus(), c.resp.GetInfo())
			if err != nil {
				t.Fatal(err)
			}
			got := st.Info
			got.Labels, got.Annotations = nil, nil
			if !reflect.DeepEqual(got, c.want) || st.created != c.created {
				t.Fatalf("got %+v created %v\nwant %+v created %v", got, st.created, c.want, c.created)
			}
		})
	}
	if _, err := infoFromCRI(nil, nil); err == nil {
		t.Fatal("a response without a status must be an error")
	}
}

func TestCRIEnrichment(t *testing.T) {
	h := newFakeHost(t)
	f := &fakeCRI{name: "containerd", statuses: map[string]*runtimeapi.ContainerStatusResponse{
		id1: kubeletStatus(id1, runtimeapi.ContainerState_CONTAINER_RUNNING, 4242),
	}}
	sock := startFakeCRI(t, f)
	r := h.resolver(Options{DockerSocket: filepath.Join(t.TempDir(), "none.sock"), CRISockets: []string{filepath.Join(t.TempDir(), "absent.sock"), sock}})
	defer r.Close()
	path := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f9b4b6e_6b1c.slice/cri-containerd-" + id1 + ".scope"
	cg := h.mkCgroup(false, path)
	h.addProcess(100, 4026532100, "0::"+path+"\n")
	info := r.Lookup(&sigvocab.Process{PID: 100, PidNS: 4026532100, CgroupID: cg})
	if info == nil || info.Runtime != RuntimeContainerd || info.Pod != "app-7d9f-xk2" || info.Namespace != "prod" ||
		info.Name != "app" || info.GracePeriod != 60 || info.PodUID != uid || info.Annotations["io.kubernetes.container.hash"] != "1a2b" {
		t.Fatalf("Info %+v", info)
	}
	if len(r.Errors()) != 0 {
		t.Fatalf("errors %v (an absent CRI socket is not an error)", r.Errors())
	}
}

// No CRI socket at all for a containerd container: counted, and the ID
// still comes back.
func TestCRIUnreachable(t *testing.T) {
	h := newFakeHost(t)
	r := h.resolver(Options{DockerSocket: filepath.Join(t.TempDir(), "none.sock"), CRISockets: []string{filepath.Join(t.TempDir(), "absent.sock")}})
	path := "/kubepods/besteffort/pod" + uid + "/crio-" + id1
	cg := h.mkCgroup(true, path)
	h.addProcess(100, 4026532100, "4:memory:"+path+"\n")
	info := r.Lookup(&sigvocab.Process{PID: 100, PidNS: 4026532100, CgroupV1ID: cg})
	if info == nil || info.ID != id1 || info.Runtime != RuntimeCRIO {
		t.Fatalf("Info %+v", info)
	}
	if r.Errors()[SourceCRI] != 1 {
		t.Fatalf("errors %v", r.Errors())
	}
}

// The kubelet's cgroupfs layout does not say which runtime: when the CRI
// endpoint does not know the ID and Docker does, it is a dockershim or
// cri-dockerd container.
func TestKubepodsBareIDFoundInDocker(t *testing.T) {
	h := newFakeHost(t)
	d := startFakeDocker(t, map[string]map[string]any{id1: dockerInspectJSON(id1, "k8s_app_web-0_shop_x_0",
		map[string]string{LabelContainerName: "app", LabelPodName: "web-0", LabelPodNamespace: "shop", AnnotationGracePeriod: "30"}, "", nil, 9)})
	crisock := startFakeCRI(t, &fakeCRI{name: "containerd"})
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{crisock}})
	defer r.Close()
	path := "/kubepods/burstable/pod" + uid + "/" + id1
	cg := h.mkCgroup(true, path)
	h.addProcess(100, 4026532100, "4:memory:"+path+"\n0::/\n")
	info := r.Lookup(&sigvocab.Process{PID: 100, PidNS: 4026532100, CgroupV1ID: cg})
	if info == nil || info.Runtime != RuntimeDocker || info.Name != "app" || info.Pod != "web-0" || info.GracePeriod != 30 {
		t.Fatalf("Info %+v", info)
	}
}

func TestListRunningCRI(t *testing.T) {
	h := newFakeHost(t)
	f := &fakeCRI{name: "containerd", statuses: map[string]*runtimeapi.ContainerStatusResponse{
		id1: kubeletStatus(id1, runtimeapi.ContainerState_CONTAINER_RUNNING, 4242),
		id2: kubeletStatus(id2, runtimeapi.ContainerState_CONTAINER_EXITED, 0),
	}}
	sock := startFakeCRI(t, f)
	r := h.resolver(Options{DockerSocket: filepath.Join(t.TempDir(), "none.sock"), CRISockets: []string{sock}})
	defer r.Close()
	runs, err := r.ListRunning(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Info.ID != id1 || runs[0].PID != 4242 || runs[0].Info.Runtime != RuntimeContainerd || runs[0].Info.Pod != "app-7d9f-xk2" {
		t.Fatalf("ListRunning = %+v", runs)
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
	for in, want := range map[string]*Hook{
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

// Every signal CRI can report maps to the kernel's number for it, as runc
// and the kubelet count them (SIGRTMIN is 34): none is taken for the
// runtime default (which would make a stop by SIGRTMAX-2 look like a
// SIGTERM stop), and the enum's aliases and RT names are the kernel's.
func TestCRISignal(t *testing.T) {
	want := map[runtimeapi.Signal]sigvocab.Signal{
		runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT: 0,
		runtimeapi.Signal_SIGNAL_SIGABRT:         6,
		runtimeapi.Signal_SIGNAL_SIGIOT:          6,
		runtimeapi.Signal_SIGNAL_SIGCHLD:         17,
		runtimeapi.Signal_SIGNAL_SIGCLD:          17,
		runtimeapi.Signal_SIGNAL_SIGIO:           29,
		runtimeapi.Signal_SIGNAL_SIGPOLL:         29,
		runtimeapi.Signal_SIGNAL_SIGPWR:          30,
		runtimeapi.Signal_SIGNAL_SIGSTKFLT:       16,
		runtimeapi.Signal_SIGNAL_SIGSYS:          31,
		runtimeapi.Signal_SIGNAL_SIGTERM:         sigvocab.SIGTERM,
		runtimeapi.Signal_SIGNAL_SIGUSR1:         sigvocab.SIGUSR1,
		runtimeapi.Signal_SIGNAL_SIGQUIT:         sigvocab.SIGQUIT,
		runtimeapi.Signal_SIGNAL_SIGKILL:         sigvocab.SIGKILL,
		runtimeapi.Signal_SIGNAL_SIGRTMIN:        34,
		runtimeapi.Signal_SIGNAL_SIGRTMINPLUS1:   35,
		runtimeapi.Signal_SIGNAL_SIGRTMINPLUS15:  49,
		runtimeapi.Signal_SIGNAL_SIGRTMAXMINUS14: 50,
		runtimeapi.Signal_SIGNAL_SIGRTMAXMINUS1:  63,
		runtimeapi.Signal_SIGNAL_SIGRTMAX:        64,
		runtimeapi.Signal(1000):                  0, // not in the enum
	}
	for s, w := range want {
		if got := criSignal(s); got != w {
			t.Errorf("criSignal(%v) = %d (%v), want %d (%v)", s, got, got, w, w)
		}
	}
	// Each named signal is a signal, and two enum values share a number
	// only as aliases.
	seen := map[sigvocab.Signal]string{}
	aliases := map[string]bool{"SIGNAL_SIGIOT": true, "SIGNAL_SIGCLD": true, "SIGNAL_SIGPOLL": true}
	for v, name := range runtimeapi.Signal_name {
		if v == 0 {
			continue
		}
		got := criSignal(runtimeapi.Signal(v))
		if got < 1 || got > sigvocab.MaxSignal {
			t.Errorf("%s: %d, want a signal", name, got)
			continue
		}
		if other, dup := seen[got]; dup && !aliases[name] && !aliases[other] {
			t.Errorf("%s and %s both %v", name, other, got)
		}
		seen[got] = name
	}
	if len(seen) != 31+31 {
		t.Errorf("%d distinct signals from CRI's enum, want 62 (1-31 and 34-64)", len(seen))
	}
}
