package container

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// ListPodSandbox lists the fake's sandboxes, all ready.
func (f *fakeCRI) ListPodSandbox(_ context.Context, _ *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*runtimeapi.PodSandbox
	for id := range f.sandboxes {
		out = append(out, &runtimeapi.PodSandbox{Id: id, State: runtimeapi.PodSandboxState_SANDBOX_READY})
	}
	return &runtimeapi.ListPodSandboxResponse{Items: out}, nil
}

// customProcess sets up a process in the cgroup at path of both
// hierarchies (a hybrid host whose runtime uses cgroupfs, as Docker here)
// and returns what its events carry.
func (h *fakeHost) customProcess(pid, pidns uint32, path string) *sigvocab.Process {
	h.t.Helper()
	v2 := h.mkCgroup(false, path)
	v1 := h.mkCgroup(true, path)
	h.addProcess(pid, pidns, "4:memory:"+path+"\n1:name=systemd:"+path+"\n0::"+path+"\n")
	return &sigvocab.Process{PID: pid, NsPID: 1, PidNS: pidns, CgroupID: v2, CgroupV1ID: v1}
}

// `docker run --cgroup-parent /custom` and a dockerd started with
// --cgroup-parent put a container's cgroup at /custom/<id>, which no
// pattern names: the runtime's list of containers and their main pids
// does. Its main process in the host's pid namespace (--pid host), no
// namespace init, resolves too, with its MainPID, and the processes of
// the container's own subgroups.
func TestOwnersCustomCgroupParent(t *testing.T) {
	h := newFakeHost(t)
	d := startFakeDocker(t, map[string]map[string]any{
		id1: dockerInspectJSON(id1, "custom-parent", nil, "", nil, 4321),
		id2: dockerInspectJSON(id2, "pid-host", nil, "", nil, 5432),
	})
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}, NoCgroupWatch: true})
	path1, path2 := "/sigscope-parent/"+id1, "/sigscope-parent/"+id2
	main1 := h.customProcess(4321, 4026532100, path1)
	main2 := h.customProcess(5432, sigvocab.HostPidNS, path2) // --pid host
	child := h.customProcess(4400, 4026532100, path1+"/sub")

	for _, c := range []struct {
		p          *sigvocab.Process
		name       string
		id         string
		mainPID    int
		processRef string
	}{{main1, "custom-parent", id1, 4321, "the namespace init"}, {main2, "pid-host", id2, 5432, "a --pid host main process"}, {child, "custom-parent", id1, 4321, "a process of a subgroup"}} {
		info := r.Lookup(c.p)
		if info == nil || info.ID != c.id || info.Name != c.name || info.Runtime != RuntimeDocker || info.MainPID != c.mainPID {
			t.Fatalf("%s: Lookup = %+v, want %s (%s, docker, main pid %d)", c.processRef, info, c.name, identity.ShortID(c.id), c.mainPID)
		}
	}
	// One list and one inspect per container, for all of them: the owners
	// and the metadata they brought are reused.
	if n := d.requests.Load(); n != 3 {
		t.Errorf("%d API requests, want 3 (a list, two inspects)", n)
	}
	if n := r.own.refreshes; n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}
	if n := r.UnresolvedCgroups(); n != 0 {
		t.Errorf("%d unresolved cgroups, want 0", n)
	}
	// The parent itself is nobody's, and a host process there is no
	// container's; the host's services cost no refresh.
	host := h.customProcess(900, sigvocab.HostPidNS, "/sigscope-parent")
	svc := h.hostProcess(901, "/system.slice/ssh.service")
	h.clock.advance(2 * ownersMinRefresh)
	for _, p := range []*sigvocab.Process{host, svc} {
		if info := r.Lookup(p); info != nil {
			t.Errorf("host process %d resolved to %+v", p.PID, info)
		}
	}
	if n := r.own.refreshes; n != 1 {
		t.Errorf("host processes made %d refreshes, want none", n-1)
	}
	if n := r.UnresolvedCgroups(); n != 0 {
		t.Errorf("host processes counted as %d unresolved cgroups", n)
	}
	if len(r.Errors()) != 0 {
		t.Errorf("errors %v", r.Errors())
	}

	// The container ends and its runtime forgets it: its cgroup is still
	// known for the TTL, for late events of processes never looked up.
	d.set(id1, nil)
	h.clock.advance(2 * ownersMinRefresh)
	r.refreshOwners()
	late := h.customProcess(4500, 4026532100, path1+"/late")
	if info := r.Lookup(late); info == nil || info.ID != id1 {
		t.Errorf("a late process of the ended container: %+v", info)
	}
}

// A layout with no container ID at all (a runtime told to use arbitrary
// cgroup paths; a cgroup namespace's view) resolves the same way.
func TestOwnersArbitraryPath(t *testing.T) {
	h := newFakeHost(t)
	f := &fakeCRI{name: "containerd"}
	f.set(id1, kubeletStatus(id1, runtimeapi.ContainerState_CONTAINER_RUNNING, 777))
	f.setSandbox(id2, sandboxStatus(id2, 666))
	sock := startFakeCRI(t, f)
	r := h.resolver(Options{DockerSocket: filepath.Join(t.TempDir(), "none.sock"), CRISockets: []string{sock}, NoCgroupWatch: true})
	h.customProcess(777, 4026532200, "/my-kubelet-root/shop/app")
	h.customProcess(666, 4026532200, "/my-kubelet-root/shop/sandbox")
	p := h.customProcess(800, 4026532200, "/my-kubelet-root/shop/app")
	if info := r.Lookup(p); info == nil || info.ID != id1 || info.Name != "app" || info.Pod != "app-7d9f-xk2" || info.Runtime != RuntimeContainerd || info.MainPID != 777 {
		t.Fatalf("Lookup = %+v, want the pod's container app", info)
	}
	pause := h.customProcess(801, 4026532200, "/my-kubelet-root/shop/sandbox")
	if info := r.Lookup(pause); info == nil || info.ID != id2 || !info.Sandbox {
		t.Fatalf("sandbox Lookup = %+v, want the pod's sandbox", info)
	}
}

// A runtime nested in a container with a cgroup parent of its own: the
// pattern names the outer container, the inner runtime's list the inner
// one.
func TestOwnersNested(t *testing.T) {
	h := newFakeHost(t)
	d := startFakeDocker(t, map[string]map[string]any{
		id2: dockerInspectJSON(id2, "inner", nil, "", nil, 4321),
	})
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}, NoCgroupWatch: true})
	inner := "/docker/" + id1 + "/nested-parent/" + id2
	h.customProcess(4321, 4026532300, inner)
	if info := r.Lookup(h.customProcess(4322, 4026532300, inner)); info == nil || info.ID != id2 || info.Name != "inner" {
		t.Fatalf("inner process: %+v, want the inner container", info)
	}
	if info := r.Lookup(h.customProcess(4000, 4026532301, "/docker/"+id1)); info == nil || info.ID != id1 {
		t.Fatalf("outer process: %+v, want the outer container", info)
	}
}

// A container-like cgroup that nothing resolves is counted once and logged
// once, however many processes and lookups it has; one of the host's is
// neither. Refreshes are rate-limited, and an unresolved cgroup is tried
// again less and less often.
func TestUnresolvedCgroupsCounted(t *testing.T) {
	h := newFakeHost(t)
	d := startFakeDocker(t, map[string]map[string]any{})
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}, NoCgroupWatch: true})

	// A pid namespace of its own in a host-looking cgroup; then a host
	// pid namespace in a cgroup named by a container ID nobody lists.
	ns := h.customProcess(100, 4026532400, "/sandboxes/one")
	for i := 0; i < 5; i++ {
		other := *ns
		other.PID, other.PidNS = uint32(101+i), uint32(4026532401+i)
		h.addProcess(other.PID, other.PidNS, "4:memory:/sandboxes/one\n0::/sandboxes/one\n")
		if info := r.Lookup(&other); info != nil {
			t.Fatalf("resolved to %+v", info)
		}
		if info := r.Lookup(ns); info != nil {
			t.Fatalf("resolved to %+v", info)
		}
	}
	if n := r.UnresolvedCgroups(); n != 1 {
		t.Fatalf("%d unresolved cgroups, want 1", n)
	}
	if n := r.own.refreshes; n != 1 {
		t.Errorf("%d refreshes within %v, want 1", n, ownersMinRefresh)
	}
	if n := strings.Count(h.logs.String(), "no container runtime names"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, h.logs.String())
	}
	if !strings.Contains(h.logs.String(), "cgroup=/sandboxes/one") {
		t.Errorf("the log does not name the cgroup:\n%s", h.logs.String())
	}

	h.clock.advance(2 * ownersMinRefresh)
	hexPath := "/elsewhere/" + strings.Repeat("ab", 32)
	if info := r.Lookup(h.customProcess(200, sigvocab.HostPidNS, hexPath)); info != nil {
		t.Fatalf("resolved to %+v", info)
	}
	if info := r.Lookup(h.hostProcess(300, "/system.slice/cron.service")); info != nil {
		t.Fatalf("resolved to %+v", info)
	}
	if n := r.UnresolvedCgroups(); n != 2 {
		t.Fatalf("%d unresolved cgroups, want 2 (the host's service is not container-like)", n)
	}

	// Tried again, with a refresh, only as its wait doubles: the cached
	// answer expires then, not at every lookup.
	before := r.own.refreshes
	for i := 0; i < 40; i++ {
		h.clock.advance(ownersMinRefresh / 2)
		r.Lookup(ns)
	}
	if n := r.own.refreshes - before; n < 2 || n > 5 {
		t.Errorf("%d refreshes in 20 s for one unresolved cgroup, want 2 to 5 (backing off from 1 s)", n)
	}
	if n := r.UnresolvedCgroups(); n != 2 {
		t.Errorf("%d unresolved cgroups after retries, want 2", n)
	}

	// Its container shows up in a runtime: resolved at the next try.
	d.set(id1, dockerInspectJSON(id1, "late", nil, "", nil, 100))
	var info *identity.Info
	for i := 0; i < 100 && info == nil; i++ {
		h.clock.advance(time.Second)
		info = r.Lookup(ns)
	}
	if info == nil || info.ID != id1 {
		t.Fatalf("after its runtime listed it: %+v", info)
	}
}

// A cgroup first seen right after a refresh waits for the next one, which
// decides without another lookup: counted when still unresolved.
func TestUnresolvedCgroupDecidedByNextRefresh(t *testing.T) {
	h := newFakeHost(t)
	r := h.resolver(Options{})
	r.Lookup(h.customProcess(100, 4026532500, "/a"))
	if n := r.UnresolvedCgroups(); n != 1 {
		t.Fatalf("%d unresolved, want 1", n)
	}
	// Within the rate limit: no refresh, so not decided yet.
	h.clock.advance(ownersMinRefresh / 2)
	r.Lookup(h.customProcess(101, 4026532501, "/b"))
	if n := r.UnresolvedCgroups(); n != 1 {
		t.Fatalf("%d unresolved before a refresh could look, want 1", n)
	}
	h.clock.advance(ownersMinRefresh)
	if !testutil.Poll(10*time.Millisecond, func() bool { return r.UnresolvedCgroups() == 2 }) {
		t.Fatalf("the armed refresh never counted the second cgroup (%d)", r.UnresolvedCgroups())
	}
}

// The owners and the unresolved cgroups are bounded by MaxEntries.
func TestOwnersBounded(t *testing.T) {
	h := newFakeHost(t)
	containers := map[string]map[string]any{}
	for i := 0; i < 6; i++ {
		id := fmt.Sprintf("%064x", 0xabc00+i)
		containers[id] = dockerInspectJSON(id, fmt.Sprint("c", i), nil, "", nil, 2000+i)
		h.customProcess(uint32(2000+i), uint32(4026532600+i), "/p/"+id)
	}
	d := startFakeDocker(t, containers)
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}, MaxEntries: 3, NoCgroupWatch: true})
	for i := 0; i < 6; i++ {
		h.clock.advance(2 * ownersMinRefresh)
		r.Lookup(h.customProcess(uint32(3000+i), uint32(4026532700+i), fmt.Sprintf("/q/%d", i)))
	}
	got := map[string]CacheSize{}
	for _, c := range r.Caches() {
		got[c.Name] = c
	}
	for _, name := range []string{"resolver_cgroup_owners", "resolver_unresolved_cgroups"} {
		if c := got[name]; c.Capacity != 3 || c.Entries > 3 || c.Entries == 0 {
			t.Errorf("%s: %+v, want 1 to 3 of 3", name, c)
		}
	}
	if n := r.UnresolvedCgroups(); n != 6 {
		t.Errorf("%d unresolved, want 6", n)
	}
}

// waitOwned waits until the owners know container id.
func waitOwned(t *testing.T, r *Resolver, id string) {
	t.Helper()
	if !testutil.Poll(5*time.Millisecond, func() bool {
		r.own.mu.Lock()
		defer r.own.mu.Unlock()
		_, ok := r.own.byID[id]
		return ok
	}) {
		t.Fatalf("the owners never learnt %s", identity.ShortID(id))
	}
}

// A container started under a custom parent while sigscope runs, and
// stopped before any of its events was looked up (the usual case: its stop
// is its first event, read after it ended): the cgroup's appearance has the
// owners refreshed in the background until the runtime lists it, so its
// name and main pid are known when the stop is read. Its main process here
// is no namespace init (--pid host).
func TestOwnersLearntBeforeFirstEvent(t *testing.T) {
	h := newFakeHost(t)
	d := startFakeDocker(t, map[string]map[string]any{})
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}})
	// runc makes the cgroup and its init; Docker lists the container once
	// it runs.
	main := h.customProcess(4321, sigvocab.HostPidNS, "/sigscope-parent/"+id1)
	time.Sleep(50 * time.Millisecond)
	d.set(id1, dockerInspectJSON(id1, "late-starter", nil, "", nil, 4321))
	h.clock.advance(ownersMinRefresh)
	waitOwned(t, r, id1)
	if n := r.UnresolvedCgroups(); n != 0 {
		t.Fatalf("%d unresolved cgroups before any lookup", n)
	}

	// Stopped and removed before the reader looked anything up.
	d.set(id1, nil)
	h.removeProcess(4321)
	info := r.Lookup(main)
	if info == nil || info.ID != id1 || info.Name != "late-starter" || info.MainPID != 4321 {
		t.Fatalf("the stopped container's main process: %+v, want late-starter with main pid 4321", info)
	}
	if n := r.UnresolvedCgroups(); n != 0 {
		t.Fatalf("%d unresolved cgroups", n)
	}
}

// The first refresh on a node of ordinary containers, which the watch has
// seen, costs one list and no inspect; one whose layout no pattern knows
// is inspected once.
func TestOwnersRefreshSkipsPatternContainers(t *testing.T) {
	h := newFakeHost(t)
	containers := map[string]map[string]any{}
	var last *sigvocab.Process
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("%064x", 0xd0c00+i)
		containers[id] = dockerInspectJSON(id, fmt.Sprint("c", i), nil, "", nil, 3000+i)
		last = h.dockerProcess(uint32(3000+i), uint32(4026532800+i), id)
	}
	containers[id1] = dockerInspectJSON(id1, "custom", nil, "", nil, 4000)
	d := startFakeDocker(t, containers)
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}})
	waitIndexed(t, r, last.CgroupV1ID, true, false)
	// The watch's prefetch inspects each (that is the ordinary
	// enrichment); wait for all of it, then count. (The watch need not
	// find their cgroups in the order they were made: waiting for c19's
	// alone once left a dozen inspects to come, counted as the refresh's,
	// in CI.)
	for i := 0; i < 20; i++ {
		name := fmt.Sprint("c", i)
		waitMeta(t, r, fmt.Sprintf("%064x", 0xd0c00+i), func(info *identity.Info) bool { return info.Name == name })
	}
	h.customProcess(4000, 4026532900, "/custom/"+id1)
	// The background refreshes the custom cgroup asks for, once a second
	// while such cgroups appear: the first may begin between its cgroup's
	// mkdir and its process's (the fake runtime lists it all along), the
	// next comes a second later.
	h.clock.advance(ownersMinRefresh)
	waitOwned(t, r, id1)
	before := d.requests.Load()
	h.clock.advance(2 * ownersMinRefresh)
	r.refreshOwners()
	// One list; id1 was inspected by the background refresh already, or
	// is now.
	if n := d.requests.Load() - before; n > 2 {
		t.Errorf("a refresh made %d requests, want a list (and at most id1's inspect)", n)
	}
	if info := r.Lookup(h.customProcess(4001, 4026532900, "/custom/"+id1)); info == nil || info.Name != "custom" {
		t.Errorf("custom: %+v", info)
	}
	r.own.mu.Lock()
	owners := len(r.own.byID)
	r.own.mu.Unlock()
	if owners != 1 {
		t.Errorf("%d owners, want 1 (the ordinary containers need none)", owners)
	}
}

// On a hybrid host every process's v2 path may be the root: the v1 memory
// cgroup tells unresolved cgroups apart, and a process at both roots is in
// no container-like cgroup.
func TestUnresolvedCgroupsHybridRoot(t *testing.T) {
	h := newFakeHost(t)
	r := h.resolver(Options{NoCgroupWatch: true})
	for i, memcg := range []string{"/jobs/a", "/jobs/b"} {
		h.mkCgroup(true, memcg)
		h.addProcess(uint32(100+i), uint32(4026533100+i), "4:memory:"+memcg+"\n0::/\n")
		h.clock.advance(2 * ownersMinRefresh)
		if info := r.Lookup(&sigvocab.Process{PID: uint32(100 + i), PidNS: uint32(4026533100 + i)}); info != nil {
			t.Fatalf("resolved to %+v", info)
		}
	}
	h.addProcess(200, 4026533200, "4:memory:/\n0::/\n")
	r.Lookup(&sigvocab.Process{PID: 200, PidNS: 4026533200})
	if n := r.UnresolvedCgroups(); n != 2 {
		t.Fatalf("%d unresolved cgroups, want 2 (/jobs/a and /jobs/b; the root is no container's)", n)
	}
}
