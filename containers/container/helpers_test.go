package container

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// countingFS counts every /proc access the resolver makes.
type countingFS struct {
	reads, links atomic.Int64
}

func (c *countingFS) ReadFile(name string) ([]byte, error) {
	c.reads.Add(1)
	return os.ReadFile(name)
}

func (c *countingFS) Readlink(name string) (string, error) {
	c.links.Add(1)
	return os.Readlink(name)
}

func (c *countingFS) total() int64 { return c.reads.Load() + c.links.Load() }

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeHost is a /proc and a hybrid cgroup tree in a temp directory. Cgroup
// ids are the real inodes of the temp directories, as on cgroupfs.
type fakeHost struct {
	t      testing.TB
	proc   string
	cgroot string
	fs     *countingFS
	clock  *clock
	logs   *testutil.SyncBuffer
}

func newFakeHost(t testing.TB) *fakeHost {
	t.Helper()
	dir := t.TempDir()
	h := &fakeHost{
		t:      t,
		proc:   filepath.Join(dir, "proc"),
		cgroot: filepath.Join(dir, "cgroup"),
		fs:     &countingFS{},
		clock:  &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		logs:   &testutil.SyncBuffer{},
	}
	for _, d := range []string{h.proc, filepath.Join(h.cgroot, "unified"), filepath.Join(h.cgroot, "memory")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(h.cgroot, "unified", "cgroup.controllers"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return h
}

// resolver returns a resolver on the fake host; opts may set runtime
// sockets, else runtime APIs are off.
func (h *fakeHost) resolver(opts Options) *Resolver {
	opts.ProcRoot, opts.CgroupRoot = h.proc, h.cgroot
	if opts.DockerSocket == "" && opts.CRISockets == nil {
		opts.NoRuntimeAPI = true
	}
	opts.Logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := newResolver(opts, h.fs, h.clock.now)
	h.t.Cleanup(func() { _ = r.Close() })
	return r
}

// addProcess writes /proc/<pid>/cgroup and the ns/pid link.
func (h *fakeHost) addProcess(pid, pidns uint32, cgroup string) {
	h.t.Helper()
	dir := filepath.Join(h.proc, strconv.Itoa(int(pid)))
	if err := os.MkdirAll(filepath.Join(dir, "ns"), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroup), 0o644); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Symlink(fmt.Sprintf("pid:[%d]", pidns), filepath.Join(dir, "ns", "pid")); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) removeProcess(pid uint32) {
	h.t.Helper()
	if err := os.RemoveAll(filepath.Join(h.proc, strconv.Itoa(int(pid)))); err != nil {
		h.t.Fatal(err)
	}
}

// mkCgroup creates a cgroup directory and returns its id (inode).
func (h *fakeHost) mkCgroup(v1 bool, path string) uint64 {
	h.t.Helper()
	full := h.cgroupDir(v1, path)
	if err := os.MkdirAll(full, 0o755); err != nil {
		h.t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(full, &st); err != nil {
		h.t.Fatal(err)
	}
	return st.Ino
}

func (h *fakeHost) rmCgroup(v1 bool, path string) {
	h.t.Helper()
	if err := os.RemoveAll(h.cgroupDir(v1, path)); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) cgroupDir(v1 bool, path string) string {
	if v1 {
		return filepath.Join(h.cgroot, "memory", path)
	}
	return filepath.Join(h.cgroot, "unified", path)
}

// dockerProcess sets up a process of a docker (cgroupfs, hybrid) container
// and returns the sigvocab.Process an event would carry for it.
func (h *fakeHost) dockerProcess(pid, pidns uint32, id string) *sigvocab.Process {
	h.t.Helper()
	path := "/docker/" + id
	v2 := h.mkCgroup(false, path)
	v1 := h.mkCgroup(true, path)
	h.addProcess(pid, pidns, "4:memory:"+path+"\n1:name=systemd:"+path+"\n0::"+path+"\n")
	return &sigvocab.Process{PID: pid, NsPID: 1, PidNS: pidns, CgroupID: v2, CgroupV1ID: v1}
}

// hostProcess sets up a process outside containers, in its own v1 memory
// cgroup and at the v2 root (a hybrid host).
func (h *fakeHost) hostProcess(pid uint32, memcg string) *sigvocab.Process {
	h.t.Helper()
	v1 := h.mkCgroup(true, memcg)
	h.addProcess(pid, sigvocab.HostPidNS, "4:memory:"+memcg+"\n0::/\n")
	return &sigvocab.Process{PID: pid, NsPID: pid, PidNS: sigvocab.HostPidNS, CgroupID: 1, CgroupV1ID: v1}
}

// waitIndexed waits until r's cgroup watch has seen the cgroup id created
// (gone false) or removed (gone true).
func waitIndexed(t testing.TB, r *Resolver, id uint64, v1, gone bool) {
	t.Helper()
	h := r.cg.hier[0]
	if v1 {
		h = r.cg.hier[1]
	}
	if !testutil.Poll(time.Millisecond, func() bool {
		r.cg.mu.Lock()
		defer r.cg.mu.Unlock()
		_, ok := h.live[id]
		if gone {
			_, ok = h.gone.Get(id)
		}
		return ok
	}) {
		t.Fatalf("the watch did not see cgroup %d (gone %v) within %v", id, gone, testutil.Bound)
	}
}
