package testutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// MemoryCgroup makes a cgroup limited to limit bytes, on the v1 memory
// controller when there is one (this machine's hybrid layout) or on a
// cgroup2 hierarchy with the memory controller enabled (the test VMs).
func MemoryCgroup(t testing.TB, limit int) (procs string) {
	t.Helper()
	return NewCgroup(t, "sigscope-oom-test", Limits{Memory: limit}).Procs[0]
}

// Limits are what NewCgroup limits; a zero field leaves that resource free.
type Limits struct {
	Memory int     // bytes, swap included (no swap to escape to)
	CPUs   float64 // CFS quota in CPUs per 100 ms period: 0.5 is half a CPU
}

// Cgroup is a cgroup made for a test, removed at cleanup: a directory in
// each v1 hierarchy it needs (memory, cpu, cpuacct) or one on cgroup2.
type Cgroup struct {
	// Procs are the cgroup.procs files a process is written to, every one
	// of them, to be in the cgroup (one per v1 hierarchy).
	Procs              []string
	v2                 bool
	memory, cpu, usage string // directories; usage is cpuacct's on v1
}

const (
	v1Root = "/sys/fs/cgroup"
	cfsUS  = 100000 // the CFS period, in µs
)

// NewCgroup makes a cgroup named name-PID with limits, on the v1
// controllers when the host has them (the VMs of `make test`, whose hybrid
// layout leaves cgroup2 controller-less) or else on a cgroup2 hierarchy
// with the controllers enabled.
func NewCgroup(t testing.TB, name string, limits Limits) *Cgroup {
	t.Helper()
	name = fmt.Sprintf("%s-%d", name, os.Getpid())
	c := &Cgroup{}
	mkdir := func(dir string) {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatalf("creating %s: %v", dir, err)
		}
		t.Cleanup(func() {
			// rmdir fails while the last process is still exiting.
			for i := 0; i < 50 && os.Remove(dir) != nil; i++ {
				time.Sleep(20 * time.Millisecond)
			}
		})
		c.Procs = append(c.Procs, filepath.Join(dir, "cgroup.procs"))
	}
	write := func(dir, file, value string) {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
			t.Fatalf("writing %s to %s: %v", value, filepath.Join(dir, file), err)
		}
	}
	_, memV1 := os.Stat(filepath.Join(v1Root, "memory", "memory.limit_in_bytes"))
	_, cpuV1 := os.Stat(filepath.Join(v1Root, "cpu", "cpu.cfs_quota_us"))
	if (limits.Memory == 0 || memV1 == nil) && (limits.CPUs == 0 || cpuV1 == nil) {
		if limits.Memory > 0 {
			c.memory = filepath.Join(v1Root, "memory", name)
			mkdir(c.memory)
			write(c.memory, "memory.limit_in_bytes", strconv.Itoa(limits.Memory))
			// Absent when swap accounting is off: then there is no swap.
			_ = os.WriteFile(filepath.Join(c.memory, "memory.memsw.limit_in_bytes"), []byte(strconv.Itoa(limits.Memory)), 0o644)
		}
		if limits.CPUs > 0 {
			c.cpu = filepath.Join(v1Root, "cpu", name)
			mkdir(c.cpu)
			write(c.cpu, "cpu.cfs_period_us", strconv.Itoa(cfsUS))
			write(c.cpu, "cpu.cfs_quota_us", strconv.Itoa(int(limits.CPUs*cfsUS)))
			// cpu and cpuacct are one hierarchy where they are co-mounted.
			c.usage = c.cpu
			if _, err := os.Stat(filepath.Join(c.cpu, "cpuacct.usage")); err != nil {
				c.usage = filepath.Join(v1Root, "cpuacct", name)
				mkdir(c.usage)
			}
		}
		return c
	}
	want := []string{}
	if limits.Memory > 0 {
		want = append(want, "memory")
	}
	if limits.CPUs > 0 {
		want = append(want, "cpu")
	}
	for _, root := range []string{v1Root, filepath.Join(v1Root, "unified")} {
		b, _ := os.ReadFile(filepath.Join(root, "cgroup.subtree_control"))
		if !slices.ContainsFunc(want, func(ctrl string) bool { return !slices.Contains(strings.Fields(string(b)), ctrl) }) {
			dir := filepath.Join(root, name)
			mkdir(dir)
			c.v2, c.memory, c.cpu, c.usage = true, dir, dir, dir
			if limits.Memory > 0 {
				write(dir, "memory.max", strconv.Itoa(limits.Memory))
				_ = os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0o644)
			}
			if limits.CPUs > 0 {
				write(dir, "cpu.max", fmt.Sprintf("%d %d", int(limits.CPUs*cfsUS), cfsUS))
			}
			return c
		}
	}
	t.Fatalf("no cgroup hierarchy with the %v controllers (v1 under %s or cgroup2 with them in cgroup.subtree_control)", want, v1Root)
	return nil
}

// Add moves pid into the cgroup.
func (c *Cgroup) Add(pid int) error {
	for _, p := range c.Procs {
		if err := os.WriteFile(p, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("moving %d into %s: %w", pid, p, err)
		}
	}
	return nil
}

// JoinAndExec is a wrapper command for StartSigscopeUnder and the like: a
// shell that moves itself into the cgroup and execs its arguments, so that
// the program starts inside it, its first allocation charged there.
func (c *Cgroup) JoinAndExec() []string {
	return []string{"sh", "-c", `for f in ` + strings.Join(c.Procs, " ") + `; do echo $$ > "$f" || exit 1; done; exec "$@"`, "sh"}
}

// CgroupUsage is what a Cgroup's processes used, read from the kernel.
type CgroupUsage struct {
	CPU        time.Duration // CPU time since the cgroup was made
	Throttled  uint64        // CFS periods in which the quota ran out
	MemoryPeak uint64        // the highest memory charge (0: the kernel does not say)
	// LimitHits counts charges that hit the memory limit (v1 failcnt,
	// cgroup2 memory.events "max"); OOMKills the OOM killer's kills in it.
	LimitHits, OOMKills uint64
}

// Usage reads the cgroup's counters; fields for a resource it does not
// limit are 0.
func (c *Cgroup) Usage() (CgroupUsage, error) {
	var u CgroupUsage
	read := func(dir, file string) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, file))
		return strings.TrimSpace(string(b)), err
	}
	// field reads "key value" lines.
	field := func(dir, file, key string) (uint64, error) {
		s, err := read(dir, file)
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(s, "\n") {
			if v, ok := strings.CutPrefix(line, key+" "); ok {
				return strconv.ParseUint(v, 10, 64)
			}
		}
		return 0, fmt.Errorf("%s: no %q", filepath.Join(dir, file), key)
	}
	number := func(dir, file string) (uint64, error) {
		s, err := read(dir, file)
		if err != nil {
			return 0, err
		}
		return strconv.ParseUint(s, 10, 64)
	}
	var errs []error
	keep := func(v uint64, err error) uint64 {
		errs = append(errs, err)
		return v
	}
	if c.cpu != "" {
		u.Throttled = keep(field(c.cpu, "cpu.stat", "nr_throttled"))
		if c.v2 {
			u.CPU = time.Duration(keep(field(c.usage, "cpu.stat", "usage_usec"))) * time.Microsecond
		} else {
			u.CPU = time.Duration(keep(number(c.usage, "cpuacct.usage")))
		}
	}
	if c.memory != "" {
		if c.v2 {
			u.LimitHits = keep(field(c.memory, "memory.events", "max"))
			u.OOMKills = keep(field(c.memory, "memory.events", "oom_kill"))
			// memory.peak is 5.19 and later.
			u.MemoryPeak, _ = number(c.memory, "memory.peak")
		} else {
			u.LimitHits = keep(number(c.memory, "memory.failcnt"))
			u.OOMKills = keep(field(c.memory, "memory.oom_control", "oom_kill"))
			u.MemoryPeak = keep(number(c.memory, "memory.max_usage_in_bytes"))
		}
	}
	return u, errors.Join(errs...)
}

// StartOOM starts cmd, a helper that prints "ready", waits for a line on
// stdin and then allocates until the OOM killer ends it, in a new cgroup
// limited to limit bytes, and lets it go. It returns the helper's pid.
func StartOOM(t testing.TB, cmd *exec.Cmd, limit int) int {
	t.Helper()
	procs := MemoryCgroup(t, limit)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	pid := StartReady(t, cmd)
	if err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0o644); err != nil {
		t.Fatalf("moving %d into the cgroup: %v", pid, err)
	}
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	return pid
}
