package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sigscope/sigscope/test/dockertest"
	"github.com/sigscope/sigscope/test/testutil"
)

// mainPID is the host pid of a running container's main process.
func mainPID(t *testing.T, name string) int {
	t.Helper()
	return hostEngine.mainPID(t, name)
}

// pidNSOf is the inode of a process's pid namespace (the "pidns" of
// sigscope's events).
func pidNSOf(t *testing.T, pid int) uint32 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/pid", pid), &st); err != nil {
		t.Fatal(err)
	}
	return uint32(st.Ino)
}

const initsTag = "sigscope-e2e-inits:latest"

var (
	initsOnce  sync.Once
	initsImg   string
	initsError error
)

// initsImage is the e2e busybox image plus the inits the stop scenarios run
// as PID 1: /sbin/tini (Debian's tini-static), /usr/bin/catatonit, and
// /sigblock and /fwdinit compiled static from testdata/*.c.
func initsImage(t *testing.T) string {
	t.Helper()
	base := busyboxImage(t)
	initsOnce.Do(func() { initsImg, initsError = buildInitsImage(t, base) })
	if initsError != nil {
		t.Fatal(initsError)
	}
	return initsImg
}

func buildInitsImage(t *testing.T, base string) (string, error) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return "", fmt.Errorf("gcc not found: the inits image compiles test/e2e/testdata/sigblock.c and fwdinit.c with `gcc -static`; install gcc and libc6-dev (apt-get install gcc libc6-dev)")
	}
	dir := t.TempDir()
	for _, prog := range []string{"sigblock", "fwdinit"} {
		out, err := exec.Command(gcc, "-static", "-O2", "-Wall", "-o", filepath.Join(dir, prog), filepath.Join("testdata", prog+".c")).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("gcc -static testdata/%s.c (static linking needs libc6-dev): %v\n%s", prog, err, out)
		}
	}
	for _, c := range []struct{ path, pkg, as string }{
		{"/usr/bin/tini-static", "tini", "tini"},
		{"/usr/bin/catatonit", "catatonit", "catatonit"},
	} {
		if _, err := os.Stat(c.path); err != nil {
			if out, err := aptGet(c.pkg); err != nil {
				return "", fmt.Errorf("%s missing and apt-get install %s failed: %v\n%s", c.path, c.pkg, err, out)
			}
		}
		if !dockertest.IsStatic(c.path) {
			return "", fmt.Errorf("%s is not a static binary: it cannot run in an image FROM scratch", c.path)
		}
		data, err := os.ReadFile(c.path)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, c.as), data, 0o755); err != nil {
			return "", err
		}
	}
	dockerfile := "FROM " + base + "\n" +
		"COPY sigblock fwdinit /\n" +
		"COPY tini /sbin/tini\n" +
		"COPY catatonit /usr/bin/catatonit\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return "", err
	}
	d := dockertest.EnsureDaemon(t)
	if _, err := d.DockerErr("build", "--quiet", "--network", "none", "--tag", initsTag, dir); err != nil {
		return "", fmt.Errorf("docker build %s: %v", initsTag, err)
	}
	return initsTag, nil
}

func aptGet(pkg string) ([]byte, error) {
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	update := exec.Command("apt-get", "update", "-qq")
	update.Env = env
	if out, err := update.CombinedOutput(); err != nil {
		return out, err
	}
	install := exec.Command("apt-get", "install", "-y", "-qq", "--no-install-recommends", pkg)
	install.Env = env
	return install.CombinedOutput()
}

// recorder is a running `sigscope trace -o json`.
type recorder struct{ *testutil.Running }

func startTrace(t *testing.T, args ...string) recorder {
	t.Helper()
	return hostEngine.startTrace(t, args...)
}

// stop ends the trace and returns its lines.
func (r recorder) stop(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, l := range r.Running.Stop(t) {
		out = append(out, string(l))
	}
	return out
}

// traceProc is a process of a trace line.
type traceProc struct {
	PID   uint32 `json:"pid"`
	Comm  string `json:"comm"`
	NsPID uint32 `json:"ns_pid"`
	PidNS uint32 `json:"pidns"`
}

// traceLine is the part of a `sigscope trace -o json` line the stream
// helpers read (docs/events.md has the whole schema).
type traceLine struct {
	Time            string               `json:"time"`
	Event           string               `json:"event"`
	Signal          string               `json:"signal"`
	Result          string               `json:"result"`
	Fate            string               `json:"fate"`
	Flags           []string             `json:"flags"`
	Handler         string               `json:"handler"`
	Group           *bool                `json:"group"`
	Sender          *traceProc           `json:"sender"`
	Target          traceProc            `json:"target"`
	ExitCode        *int                 `json:"exit_code"`
	Container       *struct{ ID string } `json:"container"`
	SenderContainer *struct{ ID string } `json:"sender_container"`
}

func parseTraceLine(t *testing.T, line string) traceLine {
	t.Helper()
	var l traceLine
	if err := json.Unmarshal([]byte(line), &l); err != nil {
		t.Fatalf("trace line %q: %v", line, err)
	}
	return l
}

// streamOf keeps the lines of a recording that are about pid namespace
// pidns (target or sender in it) or about one of the containers ids (as
// target or as sender): one container's stop, with the runtime's signals,
// the namespace's cascade and exits, and whatever its processes sent.
func streamOf(t *testing.T, lines []string, pidns uint32, ids ...string) []string {
	t.Helper()
	isID := func(c *struct{ ID string }) bool {
		if c == nil {
			return false
		}
		for _, id := range ids {
			if c.ID == id {
				return true
			}
		}
		return false
	}
	var out []string
	for _, line := range lines {
		l := parseTraceLine(t, line)
		if l.Target.PidNS == pidns || (l.Sender != nil && l.Sender.PidNS == pidns) || isID(l.Container) || isID(l.SenderContainer) {
			out = append(out, line)
		}
	}
	return out
}

// describe is a trace line in one short line of text, for test logs.
func describe(t *testing.T, line string) string {
	t.Helper()
	l := parseTraceLine(t, line)
	proc := func(p traceProc) string { return fmt.Sprintf("%d %s (ns %d)", p.PID, p.Comm, p.NsPID) }
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-8s %-8s", l.Time[11:], l.Event, l.Signal)
	if l.Result != "" {
		fmt.Fprintf(&b, " result=%s", l.Result)
	}
	if l.Fate != "" {
		fmt.Fprintf(&b, " fate=%s", l.Fate)
	}
	if l.Handler != "" {
		fmt.Fprintf(&b, " handler=%s", l.Handler)
	}
	if len(l.Flags) > 0 {
		fmt.Fprintf(&b, " flags=%s", strings.Join(l.Flags, ","))
	}
	if l.Sender != nil {
		fmt.Fprintf(&b, " %s ->", proc(*l.Sender))
	}
	fmt.Fprintf(&b, " %s", proc(l.Target))
	if l.ExitCode != nil {
		fmt.Fprintf(&b, " exit_code=%d", *l.ExitCode)
	}
	return b.String()
}

// saveStream writes a container's stop stream as
// $SIGSCOPE_RECORD_STREAMS/<name>.jsonl when that variable names a
// directory (test/e2e/testdata/record.sh sets it to episodes/timeline/testdata/streams).
func saveStream(t *testing.T, name string, stream []string) {
	t.Helper()
	dir := os.Getenv("SIGSCOPE_RECORD_STREAMS")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(stream, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d lines)", path, len(stream))
}

// stopText ends a text timeline and returns the lines of container name's
// episode: its header, steps, outcome and hint. It does not wait for late
// episodes: call it after a JSON timeline's stop, which did.
func (l live) stopText(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	in := false
	for _, b := range l.Running.Stop(t) {
		line := string(b)
		if strings.HasPrefix(line, "container ") || strings.HasPrefix(line, "pod ") || strings.HasPrefix(line, "pid namespace") {
			if in {
				break
			}
			in = strings.HasPrefix(line, "container "+name+" (")
		}
		if in {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		t.Errorf("the text timeline printed no episode for container %s", name)
	}
	return out
}

// outcomeLine is the "outcome: VERDICT — SUMMARY" line of an episode's
// text.
func outcomeLine(text []string) string {
	for _, line := range text {
		if strings.HasPrefix(line, "outcome: ") {
			return line
		}
	}
	return ""
}
