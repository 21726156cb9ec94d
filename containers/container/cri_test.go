package container

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

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
		want    identity.Info
		created bool
	}{
		{"kubelet container", kubeletStatus(id1, runtimeapi.ContainerState_CONTAINER_RUNNING, 4242),
			identity.Info{Identity: identity.Identity{ID: id1, Name: "app", Image: "registry.example/app:1.2", Pod: "app-7d9f-xk2", Namespace: "prod", PodUID: uid}, GracePeriod: 60, MainPID: 4242}, false},
		// ContainerStopSignals: containerd 2.4 reports the kubelet's
		// lifecycle.stopSignal, which it stops the container with.
		{"kubelet container with lifecycle.stopSignal", func() *runtimeapi.ContainerStatusResponse {
			r := kubeletStatus(id1, runtimeapi.ContainerState_CONTAINER_RUNNING, 4242)
			r.Status.StopSignal = runtimeapi.Signal_SIGNAL_SIGUSR1
			return r
		}(), identity.Info{Identity: identity.Identity{ID: id1, Name: "app", Image: "registry.example/app:1.2", Pod: "app-7d9f-xk2", Namespace: "prod", PodUID: uid}, GracePeriod: 60, MainPID: 4242, StopSignal: sigvocab.SIGUSR1}, false},
		// CRI-O 1.34: stop_signal unset, the signal it stops with (the
		// image's STOPSIGNAL here) in the runtime spec's annotations.
		{"CRI-O container with an image STOPSIGNAL", func() *runtimeapi.ContainerStatusResponse {
			r := kubeletStatus(id1, runtimeapi.ContainerState_CONTAINER_RUNNING, 4242)
			r.Info["info"] = `{"sandboxID":"s","pid":4242,"runtimeSpec":{"annotations":{"org.opencontainers.image.stopSignal":"SIGINT"}}}`
			return r
		}(), identity.Info{Identity: identity.Identity{ID: id1, Name: "app", Image: "registry.example/app:1.2", Pod: "app-7d9f-xk2", Namespace: "prod", PodUID: uid}, GracePeriod: 60, MainPID: 4242, StopSignal: sigvocab.SIGINT}, false},
		// Where both say, stop_signal wins: it is the runtime's own answer.
		{"stop_signal and the spec's annotation", func() *runtimeapi.ContainerStatusResponse {
			r := kubeletStatus(id1, runtimeapi.ContainerState_CONTAINER_RUNNING, 4242)
			r.Status.StopSignal = runtimeapi.Signal_SIGNAL_SIGUSR1
			r.Info["info"] = `{"pid":4242,"runtimeSpec":{"annotations":{"org.opencontainers.image.stopSignal":"SIGINT"}}}`
			return r
		}(), identity.Info{Identity: identity.Identity{ID: id1, Name: "app", Image: "registry.example/app:1.2", Pod: "app-7d9f-xk2", Namespace: "prod", PodUID: uid}, GracePeriod: 60, MainPID: 4242, StopSignal: sigvocab.SIGUSR1}, false},
		{"created, not started", kubeletStatus(id1, runtimeapi.ContainerState_CONTAINER_CREATED, 0),
			identity.Info{Identity: identity.Identity{ID: id1, Name: "app", Image: "registry.example/app:1.2", Pod: "app-7d9f-xk2", Namespace: "prod", PodUID: uid}, GracePeriod: 60}, true},
		{"image by ref, stop signal, no verbose info", &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{
			Id: id2, Metadata: &runtimeapi.ContainerMetadata{Name: "side"}, ImageRef: "sha256:ff", State: runtimeapi.ContainerState_CONTAINER_EXITED,
			StopSignal: runtimeapi.Signal_SIGNAL_SIGQUIT,
		}}, identity.Info{Identity: identity.Identity{ID: id2, Name: "side", Image: "sha256:ff"}, StopSignal: sigvocab.SIGQUIT}, false},
		{"grace period as a label, garbage verbose info", &runtimeapi.ContainerStatusResponse{
			Status: &runtimeapi.ContainerStatus{Id: id2, State: runtimeapi.ContainerState_CONTAINER_RUNNING, Labels: map[string]string{AnnotationGracePeriod: "5"}},
			Info:   map[string]string{"info": "{not json"},
		}, identity.Info{Identity: identity.Identity{ID: id2}, GracePeriod: 5}, false},
		{"bad grace period ignored", &runtimeapi.ContainerStatusResponse{
			Status: &runtimeapi.ContainerStatus{Id: id2, State: runtimeapi.ContainerState_CONTAINER_RUNNING, Annotations: map[string]string{AnnotationGracePeriod: "soon"}},
		}, identity.Info{Identity: identity.Identity{ID: id2}}, false},
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
// still comes back. The failed container is asked again every
// recheckInterval (250 ms): on a loaded machine a recheck may come before
// the count is read, and counts too.
func TestCRIUnreachable(t *testing.T) {
	h := newFakeHost(t)
	r := h.resolver(Options{DockerSocket: filepath.Join(t.TempDir(), "none.sock"), CRISockets: []string{filepath.Join(t.TempDir(), "absent.sock")}})
	path := "/kubepods/besteffort/pod" + uid + "/crio-" + id1
	start := time.Now()
	cg := h.mkCgroup(true, path)
	h.addProcess(100, 4026532100, "4:memory:"+path+"\n")
	info := r.Lookup(&sigvocab.Process{PID: 100, PidNS: 4026532100, CgroupV1ID: cg})
	if info == nil || info.ID != id1 || info.Runtime != RuntimeCRIO {
		t.Fatalf("Info %+v", info)
	}
	rechecks := uint64(time.Since(start) / defaultRecheckInterval)
	if n := r.Errors()[SourceCRI]; n < 1 || n > 1+rechecks {
		t.Fatalf("errors %v: want 1, and one more per recheck (%d in %v)", r.Errors(), rechecks, time.Since(start))
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

// A socket at a CRI path that serves no CRI API (a containerd with its CRI
// plugin disabled, as Docker's own is on a Docker host) is an absent
// runtime, not a failing one: a Docker host's containers are named, no
// error is counted, nothing is said at warn, and the socket is not asked
// again while it stays the same file.
func TestSocketWithoutCRI(t *testing.T) {
	h := newFakeHost(t)
	d := startFakeDocker(t, map[string]map[string]any{id1: dockerInspectJSON(id1, "web", nil, "", nil, 9)})
	sock := socketPath(t, "containerd.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer() // no service registered: every call is "unknown service"
	go s.Serve(l)
	t.Cleanup(s.Stop)
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{sock}})
	defer r.Close()
	runs, err := r.ListRunning(context.Background())
	if err != nil || len(runs) != 1 || runs[0].Info.ID != id1 {
		t.Fatalf("ListRunning = %+v, %v; want Docker's container and no error", runs, err)
	}
	if _, err := r.ListRunning(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e := r.Errors(); len(e) != 0 {
		t.Errorf("errors %v: a socket without CRI is no failing runtime", e)
	}
	out := h.logs.String()
	if strings.Contains(out, "level=WARN") || strings.Count(out, "not a CRI runtime") != 1 || !strings.Contains(out, `msg="container runtimes"`) {
		t.Errorf("log:\n%s\nwant the runtimes found, the socket without CRI said once at info, no warning", out)
	}
	if r.runtimes[1].present() {
		t.Error("the socket without CRI is still asked")
	}
}
