package container

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

func TestLookupHitDoesNoIO(t *testing.T) {
	h := newFakeHost(t)
	r := h.resolver(Options{})
	p := h.dockerProcess(100, 4026532180, id1)

	info := r.Lookup(p)
	if info == nil || info.ID != id1 || info.Runtime != RuntimeDocker {
		t.Fatalf("Lookup = %+v, want %s docker", info, id1)
	}
	if got := h.fs.total(); got != 2 {
		t.Fatalf("a miss made %d /proc accesses, want 2 (ns/pid link, cgroup)", got)
	}
	// The same process, and another process of the same container (same
	// key, different pid): hits, no /proc access.
	other := *p
	other.PID, other.NsPID = 101, 7
	for i := 0; i < 1000; i++ {
		if r.Lookup(p) != info || r.Lookup(&other) != info {
			t.Fatal("hit returned a different Info")
		}
	}
	if got := h.fs.total(); got != 2 {
		t.Fatalf("hits made %d more /proc accesses", got-2)
	}
}

func TestLookupHostIsCachedNegative(t *testing.T) {
	h := newFakeHost(t)
	r := h.resolver(Options{})
	p := h.hostProcess(200, "/system.slice/ssh.service")
	for i := 0; i < 100; i++ {
		if info := r.Lookup(p); info != nil {
			t.Fatalf("host process resolved to %+v", info)
		}
	}
	if got := h.fs.total(); got != 2 {
		t.Fatalf("100 lookups of a host process made %d /proc accesses, want 2", got)
	}
	if n := r.Errors(); len(n) != 0 {
		t.Fatalf("errors %v", n)
	}
}

func TestLookupGoneProcessResolvesByCgroupID(t *testing.T) {
	for _, c := range []struct {
		name string
		v1   bool
	}{{"cgroup v2 id", false}, {"cgroup v1 memory id", true}} {
		t.Run(c.name, func(t *testing.T) {
			h := newFakeHost(t)
			r := h.resolver(Options{})
			h.mkCgroup(c.v1, "/system.slice/ssh.service") // unrelated dirs in the walk
			h.mkCgroup(c.v1, "/docker/"+id2)
			id := h.mkCgroup(c.v1, "/docker/"+id1)
			waitIndexed(t, r, id, c.v1, false)
			p := &sigvocab.Process{PID: 300, NsPID: 5, PidNS: 4026532999}
			if c.v1 {
				p.CgroupV1ID = id
			} else {
				p.CgroupID = id
			}
			info := r.Lookup(p) // no /proc/300: the process is gone
			if info == nil || info.ID != id1 || info.Runtime != RuntimeDocker {
				t.Fatalf("Lookup = %+v, want %s from the cgroup id", info, id1)
			}
			if len(r.Errors()) != 0 {
				t.Fatalf("a gone process counted as an error: %v", r.Errors())
			}
		})
	}
}

func TestCgroupWalkIsCachedAndRateLimited(t *testing.T) {
	h := newFakeHost(t)
	r := h.resolver(Options{NoCgroupWatch: true}) // the fallback when inotify is not there
	a := h.mkCgroup(false, "/docker/"+id1)
	b := h.mkCgroup(false, "/docker/"+id2)
	for i, id := range []uint64{a, b} {
		if info := r.Lookup(&sigvocab.Process{PID: 9999, PidNS: uint32(4026533000 + i), CgroupID: id}); info == nil {
			t.Fatalf("cgroup %d did not resolve", id)
		}
	}
	if r.cg.walks != 1 {
		t.Fatalf("%d walks for two known cgroups, want 1 (the index is reused)", r.cg.walks)
	}
	// Unknown ids within the rewalk interval cost no walk.
	for i := 0; i < 50; i++ {
		r.Lookup(&sigvocab.Process{PID: 9999, PidNS: 1, CgroupID: uint64(1<<40 + i)})
	}
	if r.cg.walks != 1 {
		t.Fatalf("%d walks after unknown ids within a second, want 1", r.cg.walks)
	}
	// A cgroup created later is found once the interval has passed.
	h.clock.advance(2 * time.Second)
	c := h.mkCgroup(false, "/system.slice/docker-"+strings.Repeat("ab", 32)+".scope")
	if info := r.Lookup(&sigvocab.Process{PID: 9999, PidNS: 2, CgroupID: c}); info == nil || info.ID != strings.Repeat("ab", 32) {
		t.Fatalf("new cgroup resolved to %+v", info)
	}
	if r.cg.walks != 2 {
		t.Fatalf("%d walks, want 2", r.cg.walks)
	}
}

// A pid reused by a host process must not be taken for the event's
// process: the pid namespace tells them apart, and the cgroup id decides.
func TestLookupReusedPid(t *testing.T) {
	h := newFakeHost(t)
	r := h.resolver(Options{})
	h.hostProcess(400, "/user.slice")
	cg := h.mkCgroup(false, "/docker/"+id1)
	waitIndexed(t, r, cg, false, false)
	info := r.Lookup(&sigvocab.Process{PID: 400, NsPID: 3, PidNS: 4026532500, CgroupID: cg})
	if info == nil || info.ID != id1 {
		t.Fatalf("Lookup = %+v, want %s through the cgroup id", info, id1)
	}
}

// A pid and a pid namespace inode reused together (issue 28): the event's
// process, of container id1, has exited and its pid belongs now to the
// init of container id2, whose namespace got the freed inode. /proc/PID
// matches the event's namespace, yet shows another cgroup: the event's
// cgroup id decides, and the event resolves to id1, not id2.
func TestLookupReusedPidAndPidNS(t *testing.T) {
	for _, v1 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v1=%v", v1), func(t *testing.T) {
			h := newFakeHost(t)
			r := h.resolver(Options{})
			const pid, ns = 500, 4026532600
			old := h.mkCgroup(v1, "/docker/"+id1)
			waitIndexed(t, r, old, v1, false)
			// id2's cgroups are made before id1's go: the temp file
			// system reuses inodes, which cgroupfs never does.
			h.dockerProcess(pid, ns, id2) // id1's pid and inode, reused
			waitIndexed(t, r, h.mkCgroup(v1, "/docker/"+id2), v1, false)
			h.rmCgroup(v1, "/docker/"+id1) // id1 has ended
			waitIndexed(t, r, old, v1, true)
			p := &sigvocab.Process{PID: pid, NsPID: 1, PidNS: ns}
			if v1 {
				p.CgroupV1ID = old
			} else {
				p.CgroupID = old
			}
			if info := r.Lookup(p); info == nil || info.ID != id1 {
				t.Fatalf("Lookup = %+v, want %s (the event's cgroup), not %s (/proc's)", info, id1, id2)
			}
		})
	}
}

// An event with no cgroup id is cached under its pid namespace alone; once
// the namespace has ended (NamespaceEnded), the next namespace with its
// inode is resolved afresh, not served the old one's container.
func TestLookupNamespaceEnded(t *testing.T) {
	h := newFakeHost(t)
	r := h.resolver(Options{})
	const ns = 4026532700
	h.dockerProcess(600, ns, id1)
	if info := r.Lookup(&sigvocab.Process{PID: 600, NsPID: 1, PidNS: ns}); info == nil || info.ID != id1 {
		t.Fatalf("Lookup = %+v, want %s", info, id1)
	}
	h.removeProcess(600)
	r.NamespaceEnded(ns)
	// A host namespace made by unshare gets the inode.
	h.addProcess(601, ns, "4:memory:/user.slice\n0::/\n")
	if info := r.Lookup(&sigvocab.Process{PID: 601, NsPID: 1, PidNS: ns}); info != nil {
		t.Fatalf("after the namespace ended, a new one with its inode resolved to %+v, want none", info)
	}
}

func TestLookupLRUBound(t *testing.T) {
	h := newFakeHost(t)
	r := h.resolver(Options{MaxEntries: 3})
	var procs []*sigvocab.Process
	for i := 0; i < 10; i++ {
		procs = append(procs, h.hostProcess(uint32(500+i), fmt.Sprintf("/svc%d", i)))
	}
	for _, p := range procs {
		r.Lookup(p)
	}
	if n := r.entries.Len(); n != 3 {
		t.Fatalf("%d entries, want the bound 3", n)
	}
	before := h.fs.total()
	r.Lookup(procs[9]) // recent: a hit
	if h.fs.total() != before {
		t.Fatal("the most recent entry was evicted")
	}
	r.Lookup(procs[0]) // evicted: read again
	if h.fs.total() == before {
		t.Fatal("the oldest entry was not evicted")
	}
}

func TestLookupTTL(t *testing.T) {
	h := newFakeHost(t)
	const ttl = time.Minute
	r := h.resolver(Options{TTL: ttl})
	p := h.dockerProcess(600, 4026532600, id1)
	// The watch must have seen the cgroup made before it is removed: a
	// removal it never saw the creation of is not recorded (a loaded
	// machine can delay the watch past this test's next steps).
	waitIndexed(t, r, p.CgroupV1ID, true, false)
	if r.Lookup(p) == nil {
		t.Fatal("no container")
	}
	reads := h.fs.total()

	h.clock.advance(ttl - time.Second)
	if r.Lookup(p) == nil || h.fs.total() != reads {
		t.Fatal("within the TTL a lookup must be a hit")
	}

	// The container ends: process and cgroups gone (the watch sees the
	// removal now). Until the entry expires nothing changes; after, the
	// refresh finds the removed cgroup, and the container is answered for
	// one TTL from its end so late events still resolve.
	h.removeProcess(600)
	h.rmCgroup(false, "/docker/"+id1)
	h.rmCgroup(true, "/docker/"+id1)
	waitIndexed(t, r, p.CgroupV1ID, true, true)
	h.clock.advance(2 * time.Second)
	if info := r.Lookup(p); info == nil || info.ID != id1 {
		t.Fatalf("right after the container ended: %+v, want it still resolved", info)
	}
	if h.fs.total() == reads {
		t.Fatal("an expired entry must be refreshed")
	}
	h.clock.advance(ttl - 4*time.Second)
	if info := r.Lookup(p); info == nil || info.ID != id1 {
		t.Fatalf("within a TTL of the container's end: %+v, want it still resolved", info)
	}
	h.clock.advance(3 * time.Second)
	if info := r.Lookup(p); info != nil {
		t.Fatalf("a TTL after the container ended: %+v, want nil", info)
	}

	// A fresh resolver never saw it: nothing to go on.
	if info := h.resolver(Options{TTL: ttl}).Lookup(p); info != nil {
		t.Fatalf("fresh resolver: %+v, want nil", info)
	}
}

func TestLookupNoKey(t *testing.T) {
	h := newFakeHost(t)
	r := h.resolver(Options{})
	h.dockerProcess(700, 4026532700, id1)
	if r.Lookup(nil) != nil || r.Lookup(&sigvocab.Process{}) != nil {
		t.Fatal("nil and empty processes must resolve to nil")
	}
	// No ids at all: resolved from /proc, not cached under the zero key.
	for i := 1; i <= 2; i++ {
		if info := r.Lookup(&sigvocab.Process{PID: 700}); info == nil || info.ID != id1 {
			t.Fatalf("Lookup by pid only = %+v", info)
		}
		if got := h.fs.reads.Load(); got != int64(i) {
			t.Fatalf("%d cgroup reads after %d lookups", got, i)
		}
	}
	if r.entries.Len() != 0 {
		t.Fatal("the zero key was cached")
	}
}

func TestLookupConcurrent(t *testing.T) {
	h := newFakeHost(t)
	r := h.resolver(Options{MaxEntries: 8})
	var procs []*sigvocab.Process
	for i := 0; i < 4; i++ {
		id := strings.Repeat(fmt.Sprintf("%x", i+1), 64)
		procs = append(procs, h.dockerProcess(uint32(800+i), uint32(4026532800+i), id))
		procs = append(procs, h.hostProcess(uint32(900+i), fmt.Sprintf("/host%d", i)))
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				p := procs[(g+i)%len(procs)]
				info := r.Lookup(p)
				if (info != nil) != (p.PID < 900) {
					t.Errorf("pid %d: %+v", p.PID, info)
					return
				}
			}
		}()
	}
	wg.Wait()
	// Each key is resolved once: concurrent misses wait for one another.
	if got := h.fs.total(); got != 2*int64(len(procs)) {
		t.Fatalf("%d /proc accesses for %d keys, want %d", got, len(procs), 2*len(procs))
	}
}

// LookupAt judges a cached answer's age by the caller's reading of the
// clock, not its own: the pipeline reads the clock once for many events.
func TestLookupAtUsesCallersClock(t *testing.T) {
	h := newFakeHost(t)
	const ttl = time.Minute
	r := h.resolver(Options{TTL: ttl})
	p := h.dockerProcess(600, 4026532600, id1)
	then := h.clock.now()
	if r.LookupAt(p, then) == nil {
		t.Fatal("no container")
	}
	reads := h.fs.total()

	// The resolver's own clock says expired; the caller's reading does not.
	h.clock.advance(2 * ttl)
	if r.LookupAt(p, then.Add(ttl-time.Second)) == nil || h.fs.total() != reads {
		t.Fatal("an answer fresh by the caller's clock must be a hit")
	}
	// And the other way round: expired by the caller's reading.
	if r.LookupAt(p, then.Add(3*ttl)) == nil {
		t.Fatal("no container after the refresh")
	}
	if h.fs.total() == reads {
		t.Fatal("an answer expired by the caller's clock must be refreshed")
	}
}
