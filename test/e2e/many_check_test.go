package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// TestManyContainers' workloads (pid namespaces, Docker batches) and how their episodes are checked.

// manyNamespaces compiles and starts testdata/manyns.c making n
// namespaces, one every interval (0: as fast as it can).
func manyNamespaces(t *testing.T, n int, interval time.Duration) *manyNS {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "manyns")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-o", bin, filepath.Join("testdata", "manyns.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc testdata/manyns.c (apt-get install gcc libc6-dev): %v\n%s", err, out)
	}
	m := &manyNS{cmd: exec.Command(bin, strconv.Itoa(n), strconv.FormatInt(interval.Microseconds(), 10))}
	m.cmd.Stdout, m.cmd.Stderr = &m.out, &m.stderr
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.cmd.Process.Kill(); _ = m.Wait() })
	return m
}

// Wait waits for the helper to have made and stopped every namespace.
func (m *manyNS) Wait() error {
	if m.cmd.ProcessState != nil {
		return nil
	}
	if err := m.cmd.Wait(); err != nil {
		return fmt.Errorf("manyns: %v\n%s", err, m.stderr.String())
	}
	return nil
}

// records are the namespaces the helper made, in order.
func (m *manyNS) records(t *testing.T) []manyNSRecord {
	t.Helper()
	var out []manyNSRecord
	sc := bufio.NewScanner(bytes.NewReader(m.out.Bytes()))
	done := false
	for sc.Scan() {
		var r manyNSRecord
		if _, err := fmt.Sscanf(sc.Text(), "ns %d %d %d %d %d", &r.i, &r.pid, &r.pidns, &r.variant, &r.status); err == nil {
			r.sender = m.cmd.Process.Pid
			out = append(out, r)
		} else if strings.HasPrefix(sc.Text(), "done ") {
			done = true
		}
	}
	if !done {
		t.Fatalf("manyns did not finish: %d namespaces\n%s", len(out), m.stderr.String())
	}
	return out
}

// checkManyNamespaces: each namespace has exactly one episode, with its
// init as the main process, in its pid namespace, in no container, with
// the outcome and status of what it did; no episode names a namespace
// init of the helper that it did not make. Pids and namespace inodes are
// reused, so a (pid, pidns) pair may come back: the episodes of one pair
// are matched to its namespaces in start order. It returns how many
// namespaces or episodes were wrong.
func checkManyNamespaces(t *testing.T, eps map[uint64]manyEpisode, recs []manyNSRecord) int {
	t.Helper()
	type key struct {
		pid   uint32
		pidns uint32
	}
	byKey := map[key][]manyNSRecord{}
	for _, r := range recs {
		k := key{uint32(r.pid), r.pidns}
		byKey[k] = append(byKey[k], r)
	}
	var mine []manyEpisode
	for _, ep := range eps {
		if ep.Main.Comm == "manyns-init" {
			mine = append(mine, ep)
		}
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].Start.Before(mine[j].Start) })
	bad := 0
	fail := func(format string, args ...any) {
		if bad++; bad <= 20 {
			t.Errorf(format, args...)
		}
	}
	reused := 0
	for _, ep := range mine {
		k := key{ep.Main.PID, ep.Container.PidNS}
		queue := byKey[k]
		if len(queue) == 0 {
			fail("%s: no namespace the helper made had that pid and pid namespace", &ep)
			continue
		}
		r := queue[0]
		byKey[k] = queue[1:]
		if len(queue) > 1 {
			reused++
		}
		want, status, cascade := []string{"ignored_by_init", "graceful", "exited"}[r.variant], r.status, 0
		if r.variant == 0 {
			cascade = 1
		}
		st := -1
		if ep.ExitStatus != nil {
			st = *ep.ExitStatus
		}
		switch {
		case ep.Container.ID != "":
			fail("namespace %d (pid %d): %s: attributed to a container", r.i, r.pid, &ep)
		case !ep.MainIsInit || ep.Main.NsPID != 1:
			fail("namespace %d (pid %d): %s: main is not the namespace's init", r.i, r.pid, &ep)
		case ep.Outcome != want || st != status || len(ep.CascadeKills) != cascade:
			fail("namespace %d (pid %d, variant %d): %s: want %s, status %d, %d cascade kills", r.i, r.pid, r.variant, &ep, want, status, cascade)
		case r.variant != 2 && (ep.StopSender == nil || int(ep.StopSender.PID) != r.sender):
			fail("namespace %d (pid %d): %s: the stop signal's sender is not the helper %d", r.i, r.pid, &ep, r.sender)
		}
	}
	missing := 0
	for _, queue := range byKey {
		for _, r := range queue {
			if missing++; missing <= 5 {
				fail("namespace %d (pid %d, pidns %d, variant %d): no episode", r.i, r.pid, r.pidns, r.variant)
			}
		}
	}
	bad += max(missing-5, 0)
	pids, inodes := map[int]int{}, map[uint32]int{}
	for _, r := range recs {
		pids[r.pid]++
		inodes[r.pidns]++
	}
	t.Logf("many: namespaces=%d episodes=%d wrong=%d missing=%d distinct_pids=%d distinct_pidns=%d same_pid_and_pidns=%d",
		len(recs), len(mine), bad-missing, missing, len(pids), len(inodes), reused)
	return bad
}

// manyContainer is one Docker container of the loop and what its stop
// must look like.
type manyContainer struct {
	name, id string
	pidns    uint32
	outcome  string
	status   int
}

// manyDockerBatch starts containers from..to-1 at once, waits until each
// runs its script, then stops them all at once and removes them. The
// variant is i % 4:
//
//	0  sh -c 'sleep 1000 & wait', docker stop -t 1: PID 1 drops SIGTERM,
//	   SIGKILL a second later (ignored_by_init, 137)
//	1  a TERM trap that exits with 1 + i % 50, docker stop (graceful)
//	2  sh -c 'sleep 1000 & wait', docker kill (killed, 137)
//	3  exits on its own with 1 + i % 50 (exited), a second after the test
//	   has read its pid namespace: it first reads a line on its stdin,
//	   which the test writes then (it lived a second after its start, and
//	   a loaded machine took longer to say its pid)
func manyDockerBatch(t *testing.T, d *dockertest.Daemon, img, tag string, from, to int) []manyContainer {
	t.Helper()
	out := make([]manyContainer, to-from)
	var wg sync.WaitGroup
	errs := make([]error, to-from)
	for i := from; i < to; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := manyStart(d, img, fmt.Sprintf("many-%s-%d", tag, i), i)
			out[i-from], errs[i-from] = c, err
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		args := []string{"rm", "-f"}
		for _, c := range out {
			args = append(args, c.name)
		}
		_, _ = d.DockerErr(args...)
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	byVariant := [4][]string{}
	for i := from; i < to; i++ {
		byVariant[i%4] = append(byVariant[i%4], out[i-from].name)
	}
	cmds := [][]string{
		append([]string{"stop", "-t", "1"}, append(byVariant[0], byVariant[1]...)...),
		append([]string{"kill"}, byVariant[2]...),
		append([]string{"wait"}, byVariant[3]...),
	}
	for _, args := range cmds {
		if len(args) == 1 || args[0] == "stop" && len(args) == 3 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o, err := d.DockerErr(args...); err != nil {
				t.Errorf("docker %s: %v\n%s", args[0], err, o)
			}
		}()
	}
	wg.Wait()
	// What the runtime says happened, before the containers go.
	args := []string{"inspect", "-f", "{{.Name}} {{.State.ExitCode}}"}
	for _, c := range out {
		args = append(args, c.name)
	}
	o, err := d.DockerErr(args...)
	if err != nil {
		t.Fatalf("docker inspect: %v\n%s", err, o)
	}
	for i, line := range strings.Split(strings.TrimSpace(o), "\n") {
		if want := fmt.Sprintf("/%s %d", out[i].name, out[i].status); line != want {
			t.Errorf("docker inspect says %q, want %q: the workload did not do what the test expects", line, want)
		}
	}
	rm := []string{"rm"}
	for _, c := range out {
		rm = append(rm, c.name)
	}
	if o, err := d.DockerErr(rm...); err != nil {
		t.Fatalf("docker rm: %v\n%s", err, o)
	}
	return out
}

// manyStart starts container i, reads its pid namespace, and waits until
// PID 1 runs its script (sh, with its trap in place for variant 1) when
// the test is to signal it; variant 3, which is only waited for, it lets
// go on (to exit a second later).
func manyStart(d *dockertest.Daemon, img, name string, i int) (manyContainer, error) {
	code := 1 + i%50
	c := manyContainer{name: name}
	var script string
	run := []string{"run", "-d", "--network", "none", "--name", name}
	switch i % 4 {
	case 0, 2:
		script, c.status = "sleep 1000 & wait", 137
		c.outcome = map[int]string{0: "ignored_by_init", 2: "killed"}[i%4]
	case 1:
		script, c.outcome, c.status = fmt.Sprintf("trap 'exit %d' TERM; sleep 1000 & wait", code), "graceful", code
	case 3:
		script, c.outcome, c.status = fmt.Sprintf("read go; sleep 1; exit %d", code), "exited", code
		run = append(run, "-i")
	}
	_, _ = d.DockerErr("rm", "-f", name)
	id, err := d.DockerErr(append(run, img, "sh", "-c", script)...)
	if err != nil {
		return c, fmt.Errorf("docker run %s: %v\n%s", name, err, id)
	}
	c.id = strings.TrimSpace(id)
	o, err := d.DockerErr("inspect", "-f", "{{.State.Pid}}", name)
	pid, _ := strconv.Atoi(strings.TrimSpace(o))
	if err != nil || pid <= 0 {
		return c, fmt.Errorf("container %s: no pid: %v %s", name, err, o)
	}
	// The container's pid namespace is PID 1's from runc's init on.
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/pid", pid), &st); err != nil {
		return c, fmt.Errorf("container %s: PID 1 (%d): %v", name, pid, err)
	}
	c.pidns = uint32(st.Ino)
	if i%4 == 3 {
		// Its stdin is the runtime's pipe: a line there lets it go on.
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/fd/0", pid), []byte("go\n"), 0); err != nil {
			return c, fmt.Errorf("container %s: PID 1 (%d): %v", name, pid, err)
		}
		return c, nil
	}
	if !testutil.Poll(10*time.Millisecond, func() bool {
		var status []byte
		if status, err = os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err != nil {
			return true // gone
		}
		if !bytes.Contains(status, []byte("Name:\tsh\n")) {
			return false
		}
		caught, err := testutil.SigMaskOf(status, "SigCgt")
		return i%4 != 1 || err == nil && testutil.HasSig(caught, syscall.SIGTERM)
	}) {
		return c, fmt.Errorf("container %s: PID 1 (%d) not running its script after %v", name, pid, testutil.Bound)
	}
	if err != nil {
		return c, fmt.Errorf("container %s: PID 1 (%d) ended before it ran its script: %v", name, pid, err)
	}
	return c, nil
}

// checkManyContainers: each container has exactly one episode, naming it
// (ID and name) in its pid namespace, with the outcome and status its
// script implies; no episode names a container of the run that is not
// one of them. It returns how many were wrong.
func checkManyContainers(t *testing.T, eps map[uint64]manyEpisode, ctrs []manyContainer, prefix string) int {
	t.Helper()
	byID := map[string][]manyEpisode{}
	bad := 0
	fail := func(format string, args ...any) {
		if bad++; bad <= 20 {
			t.Errorf(format, args...)
		}
	}
	known := map[string]bool{}
	for _, c := range ctrs {
		known[c.id] = true
	}
	for _, ep := range eps {
		if known[ep.Container.ID] {
			byID[ep.Container.ID] = append(byID[ep.Container.ID], ep)
		} else if strings.HasPrefix(ep.Container.Name, prefix) {
			fail("%s: a container of this run that the test did not stop", &ep)
		}
	}
	for _, c := range ctrs {
		got := byID[c.id]
		if len(got) != 1 {
			fail("container %s (%.12s): %d episodes, want 1: %v", c.name, c.id, len(got), got)
			continue
		}
		ep := got[0]
		st := -1
		if ep.ExitStatus != nil {
			st = *ep.ExitStatus
		}
		if ep.Container.Name != c.name || ep.Container.PidNS != c.pidns || ep.Outcome != c.outcome || st != c.status || !ep.MainIsInit {
			fail("container %s (%.12s, pidns %d): %s: want %s, status %d", c.name, c.id, c.pidns, &ep, c.outcome, c.status)
		}
	}
	t.Logf("many: containers=%d wrong=%d", len(ctrs), bad)
	return bad
}
