package testutil

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// NSInit is a shell running as PID 1 of a new pid namespace, started with
// `unshare -p -f`. Its script should print "ready" once set up. Only options
// that util-linux and busybox share are used, so the same tests run on the
// host and in the minimal VMs of `make test-kernels`.
type NSInit struct {
	Cmd   *exec.Cmd
	PID   int // host pid of the namespace init
	Stdin io.WriteCloser
	out   *bufio.Reader
}

// StartNSInit starts `sh -c script` as PID 1 of a new pid namespace and
// waits until it prints a line "ready". The namespace is killed at cleanup.
func StartNSInit(t testing.TB, script string) *NSInit {
	t.Helper()
	return startNSInit(t, exec.Command("unshare", "-p", "-f", "sh", "-c", script))
}

// StartNSInitIn is StartNSInit with more namespaces of its own, as
// unshare(1)'s flags ("-m", "-u", ...): a test that wants a container to get
// the pid namespace inode it frees makes and frees as many as a container
// makes before its pid namespace (the kernel gives out the lowest free
// inode, mount, UTS and IPC namespaces first).
func StartNSInitIn(t testing.TB, flags []string, script string) *NSInit {
	t.Helper()
	args := append(append([]string{"-p", "-f"}, flags...), "sh", "-c", script)
	return startNSInit(t, exec.Command("unshare", args...))
}

// StartNSInitUnnotified is StartNSInit with a parent that ignores SIGCHLD:
// do_notify_parent() then sends no signal for the init's exit, so the
// tracer records no ns_empty for it and its episode can only end by its
// settle time (the deadline path). unshare(1) resets SIGCHLD, so the parent
// is perl (Debian's essential perl-base), which makes the namespace itself
// with the unshare(2) system call.
func StartNSInitUnnotified(t testing.TB, script string) *NSInit {
	t.Helper()
	const parent = `use Config;
my %nr = (x86_64 => 272, aarch64 => 97);
my ($arch) = $Config{archname} =~ /^([^-]+)/;
$nr{$arch} or die "no unshare(2) number for $arch";
$SIG{CHLD} = "IGNORE";
syscall($nr{$arch}, 0x20000000) == 0 or die "unshare(CLONE_NEWPID): $!";
my $pid = fork() // die "fork: $!";
if ($pid == 0) { exec "sh", "-c", $ARGV[0] or die "exec: $!" }
sleep;`
	return startNSInit(t, exec.Command("perl", "-e", parent, script))
}

func startNSInit(t testing.TB, cmd *exec.Cmd) *NSInit {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting unshare: %v", err)
	}
	n := &NSInit{Cmd: cmd, Stdin: stdin, out: bufio.NewReader(stdout)}
	t.Cleanup(func() {
		// Killing the init kills its whole namespace.
		if n.PID > 0 {
			_ = syscall.Kill(n.PID, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	n.WaitLine(t, "ready")
	kids := Children(t, cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("unshare %d has children %v, want exactly the namespace init", cmd.Process.Pid, kids)
	}
	n.PID = kids[0]
	return n
}

// WaitLine reads the init's stdout until a line equal to want.
func (n *NSInit) WaitLine(t testing.TB, want string) {
	t.Helper()
	waitLine(t, n.out, want)
}

// StartReady starts cmd, waits until it prints a line "ready" on stdout, and
// kills it at cleanup. It returns the process id.
func StartReady(t testing.TB, cmd *exec.Cmd) int {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %v: %v", cmd.Args, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitLine(t, bufio.NewReader(out), "ready")
	return cmd.Process.Pid
}

func waitLine(t testing.TB, r *bufio.Reader, want string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		for {
			line, err := r.ReadString('\n')
			if strings.TrimSpace(line) == want {
				done <- nil
				return
			}
			if err != nil {
				done <- fmt.Errorf("output ended before %q: %v", want, err)
				return
			}
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(Bound):
		t.Fatalf("timed out waiting for %q (%v)", want, Bound)
	}
}

// WaitCommand waits until a container's main process (pid) runs its
// command: runc's init has exec'd it. A shell
// script (sh -c) is waited for further, until the shell waits with a child
// (a background one, or a foreground command): every line before that
// wait has run, its traps included; or until it has exec'd another
// program. A program's own handlers are its test's to wait for (a line it
// prints, a bit in SigCgt). what names the container in a failure.
func WaitCommand(t testing.TB, what string, pid int) {
	t.Helper()
	var state string
	if !Poll(10*time.Millisecond, func() bool {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		argv := strings.Split(string(cmdline), "\x00")
		switch {
		case err != nil:
			return true // gone: it ran, and the test will see how it ended
		case strings.HasPrefix(string(comm), "runc"):
			state = "runc's init"
			return false
		case len(argv) < 2 || filepath.Base(argv[0]) != "sh" || argv[1] != "-c":
			return true
		}
		in, _ := Syscall(pid)
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		state = fmt.Sprintf("the shell in %q, children %q", in, kids)
		return len(bytes.TrimSpace(kids)) > 0 && slices.Contains([]string{"wait4", "waitid", "rt_sigsuspend"}, in)
	}) {
		t.Fatalf("%s (pid %d) does not run its command after %v: %s", what, pid, Bound, state)
	}
}

// MainProcess is the main process of the container whose ID is id: the
// process of a cgroup whose path holds id, and whose parent is in none
// (the runtime's shim, conmon). 0 when no process is in one.
func MainProcess(id string) int {
	in := map[int]int{} // pid: parent
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil || !bytes.Contains(cg, []byte(id)) {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		i := bytes.LastIndexByte(stat, ')')
		if err != nil || i < 0 {
			continue
		}
		// After the command: the state, then the parent's pid.
		if f := strings.Fields(string(stat[i+1:])); len(f) > 1 {
			in[pid], _ = strconv.Atoi(f[1])
		}
	}
	for pid, parent := range in {
		if _, ok := in[parent]; !ok {
			return pid
		}
	}
	return 0
}

// Alive says whether process pid exists and has not exited (a zombie that
// its parent has not reaped yet has).
func Alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command, which is in parentheses and may hold
	// any byte.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// Children lists the direct children of pid (all its threads' children).
func Children(t testing.TB, pid int) []int {
	t.Helper()
	var out []int
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatalf("reading tasks of %d: %v", pid, err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// Run runs a command to completion and fails the test if it fails. Signals
// sent by the test binary itself would be filtered out by the tracer (it
// drops its own tgid), so senders are always separate processes.
func Run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// PidNS is the inode of the init's pid namespace (/proc/PID/ns/pid).
func (n *NSInit) PidNS(t testing.TB) uint32 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(n.PID)+"/ns/pid", &st); err != nil {
		t.Fatal(err)
	}
	return uint32(st.Ino)
}
