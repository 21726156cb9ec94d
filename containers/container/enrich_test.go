package container

import (
	"context"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// fastRechecks returns opts with the resolver's rechecks shortened.
func fastRechecks(opts Options, every time.Duration, tries int) Options {
	opts.recheckInterval, opts.recheckTries = every, tries
	return opts
}

// kubepodsProcess sets up a process of a pod's container or sandbox in the
// kubelet's cgroupfs layout on a hybrid host (the v1 memory cgroup holds
// it) and returns what an event would carry for it.
func (h *fakeHost) kubepodsProcess(pid, pidns uint32, id string) *sigvocab.Process {
	h.t.Helper()
	path := "/kubepods/besteffort/pod" + uid + "/" + id
	v1 := h.mkCgroup(true, path)
	h.addProcess(pid, pidns, "4:memory:"+path+"\n0::/\n")
	return &sigvocab.Process{PID: pid, NsPID: 1, PidNS: pidns, CgroupID: 1, CgroupV1ID: v1}
}

// waitInfo polls Lookup (each a cache hit) until ok accepts the answer.
func waitInfo(t *testing.T, r *Resolver, p *sigvocab.Process, what string, ok func(*identity.Info) bool) *identity.Info {
	t.Helper()
	var info *identity.Info
	if !testutil.Poll(5*time.Millisecond, func() bool { info = r.Lookup(p); return info != nil && ok(info) }) {
		t.Fatalf("%s: never came; last Info %+v", what, info)
	}
	return info
}

func createdInspect(id, name string) map[string]any {
	ins := dockerInspectJSON(id, name, nil, "", nil, 0)
	ins["State"] = map[string]any{"Status": "created", "Running": false, "Pid": 0}
	return ins
}

// The watch sees a container's cgroup before its runtime has started it
// (runc makes the cgroup, then starts the process): the first answer has no
// main pid. The resolver asks again by itself, so that the Info that
// lookups (cache hits, no I/O) return gets MainPID without anyone asking.
func TestDockerMainPIDAfterStart(t *testing.T) {
	h := newFakeHost(t)
	d := startFakeDocker(t, map[string]map[string]any{id1: createdInspect(id1, "web")})
	r := h.resolver(fastRechecks(Options{DockerSocket: d.socket, CRISockets: []string{}}, 20*time.Millisecond, 20))
	p := h.dockerProcess(100, 4026532100, id1)
	// The watch's enrichment, before any lookup: created, no pid.
	waitMeta(t, r, id1, func(i *identity.Info) bool { return i.Name == "web" })
	info := r.Lookup(p)
	if info == nil || info.Name != "web" {
		t.Fatalf("Info %+v", info)
	}
	reads := h.fs.total()

	started := dockerInspectJSON(id1, "web", nil, "", nil, 4321)
	started["State"] = map[string]any{"Status": "running", "Running": true, "Pid": 4321}
	d.set(id1, started)
	waitInfo(t, r, p, "MainPID after the start", func(i *identity.Info) bool { return i.MainPID == 4321 })
	if h.fs.total() != reads {
		t.Fatalf("waiting on hits made %d /proc accesses", h.fs.total()-reads)
	}
	// Once it has its pid, the runtime is not asked again.
	n := d.requests.Load()
	time.Sleep(10 * r.opts.recheckInterval)
	if d.requests.Load() != n {
		t.Fatalf("%d more requests after the pid was known", d.requests.Load()-n)
	}

	// Stopped (docker stop): a later refresh says pid 0, and the main pid
	// stays the one it had.
	stopped := dockerInspectJSON(id1, "web", nil, "", nil, 0)
	stopped["State"] = map[string]any{"Status": "exited", "Running": false, "Pid": 0}
	d.set(id1, stopped)
	h.clock.advance(DefaultTTL + time.Second)
	h.removeProcess(100)
	if info := r.Lookup(p); info == nil || info.MainPID != 4321 {
		t.Fatalf("after the stop: %+v, want MainPID 4321 still", info)
	}
}

// A container that never starts is asked about a bounded number of times.
func TestMainPIDRechecksAreBounded(t *testing.T) {
	h := newFakeHost(t)
	d := startFakeDocker(t, map[string]map[string]any{id1: createdInspect(id1, "never")})
	r := h.resolver(fastRechecks(Options{DockerSocket: d.socket, CRISockets: []string{}}, 5*time.Millisecond, 4))
	h.dockerProcess(100, 4026532100, id1)
	waitMeta(t, r, id1, func(i *identity.Info) bool { return i.Name == "never" })
	testutil.WaitFor(t, "the recheck to give up", func() bool {
		r.recheckMu.Lock()
		defer r.recheckMu.Unlock()
		return len(r.rechecks) == 0
	})
	// The first ask, and recheckTries more.
	if n := d.requests.Load(); n != int64(1+r.opts.recheckTries) {
		t.Fatalf("%d requests, want %d", n, 1+r.opts.recheckTries)
	}
	time.Sleep(20 * r.opts.recheckInterval)
	if n := d.requests.Load(); n != int64(1+r.opts.recheckTries) {
		t.Fatalf("%d requests after giving up", n)
	}
}

func TestCRIMainPIDAfterStart(t *testing.T) {
	h := newFakeHost(t)
	f := &fakeCRI{name: "containerd"}
	f.set(id1, kubeletStatus(id1, runtimeapi.ContainerState_CONTAINER_CREATED, 0))
	sock := startFakeCRI(t, f)
	r := h.resolver(fastRechecks(Options{DockerSocket: filepath.Join(t.TempDir(), "none.sock"), CRISockets: []string{sock}}, 20*time.Millisecond, 20))
	p := h.kubepodsProcess(100, 4026532100, id1)
	if info := r.Lookup(p); info == nil || info.Name != "app" || info.Runtime != RuntimeContainerd {
		t.Fatalf("Info %+v", info)
	}
	f.set(id1, kubeletStatus(id1, runtimeapi.ContainerState_CONTAINER_RUNNING, 777))
	waitInfo(t, r, p, "MainPID after the start", func(i *identity.Info) bool { return i.MainPID == 777 })
}

// sandboxStatus is PodSandboxStatus as containerd answers it for a pod the
// kubelet made.
func sandboxStatus(id string, pid int) *runtimeapi.PodSandboxStatusResponse {
	return &runtimeapi.PodSandboxStatusResponse{
		Status: &runtimeapi.PodSandboxStatus{
			Id:       id,
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "web-0", Namespace: "shop", Uid: uid},
			State:    runtimeapi.PodSandboxState_SANDBOX_READY,
			Labels: map[string]string{
				LabelPodName: "web-0", LabelPodNamespace: "shop", LabelPodUID: uid,
			},
			Annotations: map[string]string{"kubernetes.io/config.source": "api"},
		},
		Info: map[string]string{"info": `{"pid":` + itoa(pid) + `,"processStatus":"running","netNamespaceClosed":false}`},
	}
}

// A pod's sandbox has a container-like cgroup, and CRI answers NotFound to
// ContainerStatus for it: PodSandboxStatus tells what it is.
func TestCRISandbox(t *testing.T) {
	h := newFakeHost(t)
	f := &fakeCRI{name: "containerd"}
	f.setSandbox(id2, sandboxStatus(id2, 555))
	f.set(id1, kubeletStatus(id1, runtimeapi.ContainerState_CONTAINER_RUNNING, 4242))
	sock := startFakeCRI(t, f)
	r := h.resolver(Options{DockerSocket: filepath.Join(t.TempDir(), "none.sock"), CRISockets: []string{sock}})
	info := r.Lookup(h.kubepodsProcess(100, 4026532100, id2))
	want := identity.Info{Identity: identity.Identity{ID: id2, Runtime: RuntimeContainerd, Name: SandboxName, Pod: "web-0", Namespace: "shop", PodUID: uid}, Sandbox: true, MainPID: 555}
	if info == nil {
		t.Fatal("no Info")
	}
	got := *info
	got.Labels, got.Annotations = nil, nil
	if !reflect.DeepEqual(got, want) || info.Labels[LabelPodName] != "web-0" {
		t.Fatalf("sandbox Info\n %+v\nwant\n %+v", info, want)
	}
	if info.DisplayName() != "shop/web-0/POD" {
		t.Errorf("DisplayName %q", info.DisplayName())
	}
	if app := r.Lookup(h.kubepodsProcess(101, 4026532101, id1)); app == nil || app.Sandbox || app.MainPID != 4242 {
		t.Fatalf("app container Info %+v", app)
	}
	if len(r.Errors()) != 0 {
		t.Fatalf("errors %v", r.Errors())
	}
}

// containerd registers a sandbox only once it runs, after runc made its
// cgroup: the watch's enrichment finds nobody who knows the id, and the
// resolver asks again until the runtime does.
func TestCRISandboxRegisteredLate(t *testing.T) {
	h := newFakeHost(t)
	f := &fakeCRI{name: "containerd"}
	sock := startFakeCRI(t, f)
	r := h.resolver(fastRechecks(Options{DockerSocket: filepath.Join(t.TempDir(), "none.sock"), CRISockets: []string{sock}}, 20*time.Millisecond, 20))
	p := h.kubepodsProcess(100, 4026532100, id2)
	waitMeta(t, r, id2, func(i *identity.Info) bool { return bare(i) })
	f.setSandbox(id2, sandboxStatus(id2, 555))
	info := waitInfo(t, r, p, "sandbox once registered", func(i *identity.Info) bool { return i.Sandbox })
	if info.Pod != "web-0" || info.Namespace != "shop" || info.MainPID != 555 {
		t.Fatalf("Info %+v", info)
	}
}

// dockershim and cri-dockerd label the pause container.
func TestDockerSandboxLabel(t *testing.T) {
	h := newFakeHost(t)
	kube := func(typ string) map[string]string {
		return map[string]string{LabelDockerType: typ, LabelPodName: "web-0", LabelPodNamespace: "shop", LabelPodUID: uid,
			LabelContainerName: map[string]string{"podsandbox": "POD", "container": "app"}[typ]}
	}
	d := startFakeDocker(t, map[string]map[string]any{
		id1: dockerInspectJSON(id1, "k8s_app_web-0_shop_"+uid+"_0", kube("container"), "", nil, 11),
		id2: dockerInspectJSON(id2, "k8s_POD_web-0_shop_"+uid+"_0", kube("podsandbox"), "", nil, 12),
	})
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}})
	sb := r.Lookup(h.dockerProcess(100, 4026532100, id2))
	if sb == nil || !sb.Sandbox || sb.Pod != "web-0" || sb.MainPID != 12 || sb.DisplayName() != "shop/web-0/POD" {
		t.Fatalf("sandbox Info %+v", sb)
	}
	if app := r.Lookup(h.dockerProcess(101, 4026532101, id1)); app == nil || app.Sandbox || app.MainPID != 11 {
		t.Fatalf("app Info %+v", app)
	}
	runs, err := r.ListRunning(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Info.ID != id1 || runs[0].PID != 11 {
		t.Fatalf("ListRunning = %+v, want the app container only", runs)
	}
}

// refusedSocket is a unix socket file nobody listens on: connecting is
// refused.
func refusedSocket(t *testing.T, name string) string {
	t.Helper()
	path := socketPath(t, name)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	return path
}

func warnings(logs string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "level=WARN") {
			out = append(out, l)
		}
	}
	return out
}

// Two CRI sockets that refuse: each is reported once, however many
// containers need them; the IDs still come from cgroup paths.
func TestRefusedSocketsWarnOncePerEndpoint(t *testing.T) {
	h := newFakeHost(t)
	a, b := refusedSocket(t, "a.sock"), refusedSocket(t, "b.sock")
	dockerSock := refusedSocket(t, "docker.sock")
	r := h.resolver(Options{DockerSocket: dockerSock, CRISockets: []string{a, b}})
	for i := 0; i < 4; i++ {
		id := strings.Repeat(string("abcd"[i]), 64)
		p := h.kubepodsProcess(uint32(100+i), uint32(4026532100+i), id)
		if info := r.Lookup(p); info == nil || info.ID != id || info.Runtime != RuntimeContainerd {
			t.Fatalf("Info %+v: the ID and runtime must come from the cgroup path", info)
		}
		if info := r.Lookup(h.dockerProcess(uint32(200+i), uint32(4026532200+i), strings.Repeat(string("5678"[i]), 64))); info == nil || info.Runtime != RuntimeDocker {
			t.Fatalf("docker Info %+v (i %d)\n%s", info, i, h.logs.String())
		}
		h.clock.advance(r.retryInterval + time.Second) // each endpoint is tried again
	}
	warns := warnings(h.logs.String())
	for _, sock := range []string{a, b, dockerSock} {
		n := 0
		for _, w := range warns {
			if strings.Contains(w, sock) && strings.Contains(w, "connection refused") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d warnings naming %s, want 1", n, sock)
		}
	}
	if len(warns) != 3 {
		t.Errorf("%d warnings, want 3:\n%s", len(warns), strings.Join(warns, "\n"))
	}
	if e := r.Errors(); e[SourceCRI] == 0 || e[SourceDocker] == 0 {
		t.Errorf("errors %v", e)
	}
}

// Sockets given explicitly that do not exist: one warning each, at once,
// and nothing more when containers need them.
func TestExplicitMissingSocketsWarnOnce(t *testing.T) {
	h := newFakeHost(t)
	dir := t.TempDir()
	dockerSock, criSock := filepath.Join(dir, "docker.sock"), filepath.Join(dir, "cri.sock")
	r := h.resolver(Options{DockerSocket: "unix://" + dockerSock, CRISockets: []string{criSock}})
	if warns := warnings(h.logs.String()); len(warns) != 2 {
		t.Fatalf("%d warnings at the start, want one per missing socket:\n%s", len(warns), strings.Join(warns, "\n"))
	}
	for i := 0; i < 3; i++ {
		id := strings.Repeat(string("abc"[i]), 64)
		if info := r.Lookup(h.kubepodsProcess(uint32(100+i), uint32(4026532100+i), id)); info == nil || info.ID != id {
			t.Fatalf("Info %+v", info)
		}
		did := strings.Repeat(string("def"[i]), 64)
		if info := r.Lookup(h.dockerProcess(uint32(200+i), uint32(4026532200+i), did)); info == nil || info.ID != did {
			t.Fatalf("Info %+v", info)
		}
		h.clock.advance(r.retryInterval + time.Second)
	}
	warns := warnings(h.logs.String())
	if len(warns) != 2 || !strings.Contains(warns[0], dockerSock) || !strings.Contains(warns[1], criSock) {
		t.Fatalf("warnings:\n%s\nwant one naming %s and one naming %s", strings.Join(warns, "\n"), dockerSock, criSock)
	}
}

// waitMeta waits until the resolver's metadata for id satisfies ok.
func waitMeta(t *testing.T, r *Resolver, id string, ok func(*identity.Info) bool) {
	t.Helper()
	var info *identity.Info
	if !testutil.Poll(2*time.Millisecond, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if m, found := r.metas.Get(id); found {
			info = m.info
		}
		return info != nil && ok(info)
	}) {
		t.Fatalf("metadata of %s never came: %+v", identity.ShortID(id), info)
	}
}

// A runtime that fails for a moment (issue 28): the containers it could not
// be asked about are asked again by themselves, without any lookup, once
// it answers; meanwhile Known says why they have no name. The endpoint is
// left alone for about a second after one failure, not retryInterval.
func TestFailedEnrichmentIsAskedAgain(t *testing.T) {
	h := newFakeHost(t)
	d := startFakeDocker(t, map[string]map[string]any{id1: dockerInspectJSON(id1, "web", nil, "", nil, 4321)})
	d.failing.Store(true)
	r := h.resolver(fastRechecks(Options{DockerSocket: d.socket, CRISockets: []string{}}, 20*time.Millisecond, 20))
	p := h.dockerProcess(100, 4026532100, id1)
	if info := r.Lookup(p); info == nil || info.ID != id1 || info.Name != "" {
		t.Fatalf("Lookup while Docker fails = %+v, want its ID and no name", info)
	}
	if _, why := r.Known(id1); !strings.Contains(why, "daemon is sick") {
		t.Fatalf("Known's why = %q, want Docker's error", why)
	}
	r.errMu.Lock()
	o := r.down[d.socket]
	left := o.until.Sub(h.clock.now())
	r.errMu.Unlock()
	if left <= 0 || left > 2*outageMin {
		t.Fatalf("one failure leaves Docker alone for %v, want about %v", left, outageMin)
	}
	d.failing.Store(false)
	h.clock.advance(2 * outageMin)
	waitMeta(t, r, id1, func(i *identity.Info) bool { return i.Name == "web" })
	if info, why := r.Known(id1); info.Name != "web" || why != "" {
		t.Fatalf("Known = %+v, %q after Docker answered", info, why)
	}
	if info := r.Lookup(p); info == nil || info.Name != "web" || info.MainPID != 4321 {
		t.Fatalf("Lookup after Docker answered = %+v", info)
	}
}
