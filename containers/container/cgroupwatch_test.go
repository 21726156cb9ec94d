package container

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// A container created after the resolver started, whose processes and
// cgroups are all gone before the first lookup (docker rm -f, or a reader
// that fell behind): the watch saw its cgroups come and go, so it still
// resolves, without any walk. Without the watch there is no trace of it.
func TestWatchResolvesContainerGoneBeforeLookup(t *testing.T) {
	cid := strings.Repeat("c7", 32)
	for _, c := range []struct {
		name string
		v1   bool
		path string
		want string
	}{
		{"docker v2", false, "/system.slice/docker-" + cid + ".scope", RuntimeDocker},
		// The kubelet's cgroupfs layout, made in one go: the pod's
		// directory and the container's inside it appear faster than a
		// watch is put on the pod's, so its creation walks it.
		{"kubepods v1", true, "/kubepods/burstable/pod0b7d6c6e-8f1a-4c3e-9d2b-5a6f7e8d9c0b/" + cid, RuntimeContainerd},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newFakeHost(t)
			r := h.resolver(Options{})
			unwatched := h.resolver(Options{NoCgroupWatch: true})
			id := h.mkCgroup(c.v1, c.path)
			waitIndexed(t, r, id, c.v1, false)
			walks := r.cg.walks
			h.rmCgroup(c.v1, strings.SplitN(c.path, "/", 3)[1]) // the whole subtree
			waitIndexed(t, r, id, c.v1, true)

			p := &sigvocab.Process{PID: 4242, NsPID: 1, PidNS: 4026533100}
			if c.v1 {
				p.CgroupV1ID = id
			} else {
				p.CgroupID = id
			}
			if info := r.Lookup(p); info == nil || info.ID != cid || info.Runtime != c.want {
				t.Fatalf("Lookup = %+v, want %s %s", info, cid, c.want)
			}
			if r.cg.walks != walks {
				t.Errorf("%d walks after the start, want none: the watch keeps the index", r.cg.walks-walks)
			}
			if info := unwatched.Lookup(p); info != nil {
				t.Errorf("without a watch: %+v, want nil (nothing left to find)", info)
			}
		})
	}
}

// Lost inotify events (a queue overflow) make the watch rewalk, so the
// index is whole again.
func TestWatchOverflowRewalks(t *testing.T) {
	h := newFakeHost(t)
	r := h.resolver(Options{})
	id := h.mkCgroup(false, "/docker/"+id1)
	waitIndexed(t, r, id, false, false)
	// Forget it, as if its creation event had been lost.
	r.cg.mu.Lock()
	delete(r.cg.hier[0].live, id)
	delete(r.cg.hier[0].ids, "/docker/"+id1)
	walks := r.cg.walks
	r.cg.mu.Unlock()

	ev := make([]byte, unix.SizeofInotifyEvent)
	binary.NativeEndian.PutUint32(ev[0:4], ^uint32(0)) // wd -1
	binary.NativeEndian.PutUint32(ev[4:8], unix.IN_Q_OVERFLOW)
	r.watch.handle(ev)

	if r.cg.walks <= walks {
		t.Fatal("an overflow did not rewalk")
	}
	waitIndexed(t, r, id, false, false)
}

// Removed cgroups are remembered for the TTL, no longer.
func TestWatchForgetsRemovedAfterTTL(t *testing.T) {
	h := newFakeHost(t)
	const ttl = time.Minute
	r := h.resolver(Options{TTL: ttl})
	id := h.mkCgroup(false, "/docker/"+id2)
	waitIndexed(t, r, id, false, false)
	h.rmCgroup(false, "/docker/"+id2)
	waitIndexed(t, r, id, false, true)
	p := &sigvocab.Process{PID: 4243, PidNS: 4026533101, CgroupID: id}
	h.clock.advance(ttl - time.Second)
	if info := r.Lookup(p); info == nil || info.ID != id2 {
		t.Fatalf("within the TTL: %+v", info)
	}
	h.clock.advance(2 * time.Second)
	if info := r.Lookup(p); info != nil {
		t.Fatalf("a TTL after removal: %+v, want nil", info)
	}
}

// Cgroups there at the start are enriched in the background, unless they
// hold no process (a runtime's leftovers): no event can come from those,
// and a runtime that is gone would be asked about them, and fail, for
// minutes.
func TestEmptyCgroupsAtStartNotAsked(t *testing.T) {
	h := newFakeHost(t)
	emptyID, busyID := strings.Repeat("e", 64), strings.Repeat("b", 64)
	for id, procs := range map[string]string{emptyID: "", busyID: "4242\n"} {
		for _, v1 := range []bool{false, true} {
			h.mkCgroup(v1, "/docker/"+id)
			if err := os.WriteFile(filepath.Join(h.cgroupDir(v1, "/docker/"+id), "cgroup.procs"), []byte(procs), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	d := startFakeDocker(t, map[string]map[string]any{
		emptyID: dockerInspectJSON(emptyID, "empty", nil, "", nil, 0),
		busyID:  dockerInspectJSON(busyID, "busy", nil, "", nil, 4242),
	})
	r := h.resolver(Options{DockerSocket: d.socket, CRISockets: []string{}})
	waitMeta(t, r, busyID, func(i *identity.Info) bool { return i.Name == "busy" })
	r.mu.Lock()
	_, asked := r.metas.Get(emptyID)
	r.mu.Unlock()
	if asked {
		t.Error("the empty cgroup's container was asked about")
	}
}
