package tracer

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// What the task iterator printed for docker-init (tini) waiting in
// sigtimedwait, on 6.18 (the kernel facts note): blocked empty, the waited
// set in real_blocked, SIGNAL_UNKILLABLE, SIG_DFL everywhere.
func TestTaskSnapshotStateTini(t *testing.T) {
	s := sigvocab.TaskSnapshot{SigFlags: sigvocab.SignalUnkillable, RealBlocked: 0xfffffffe3fcbfa07}
	st := s.State(sigvocab.SIGTERM)
	if !st.Waited || st.Blocked || !st.NSInit || st.Exiting || st.Handler != sigvocab.DispDefault {
		t.Fatalf("state %+v, want waited SIGTERM at an init with SIG_DFL", st)
	}
	if f := sigvocab.PredictFate(sigvocab.SIGTERM, st, true); f != sigvocab.FateSigwait {
		t.Errorf("fate %s, want sigwait", f)
	}
	// Between two sigtimedwait calls tini blocks everything instead.
	s.Blocked, s.RealBlocked = s.RealBlocked, 0
	if st := s.State(sigvocab.SIGTERM); !st.Blocked || st.Waited {
		t.Errorf("blocked tini: %+v", st)
	}
}

func TestTaskSnapshotState(t *testing.T) {
	term := sigvocab.NewSignalSet(sigvocab.SIGTERM)
	cases := []struct {
		name string
		s    sigvocab.TaskSnapshot
		want sigvocab.TaskState
	}{
		{"handler", sigvocab.TaskSnapshot{Handled: term}, sigvocab.TaskState{Handler: sigvocab.DispHandler}},
		{"SIG_IGN at an init", sigvocab.TaskSnapshot{Ignored: term, SigFlags: sigvocab.SignalUnkillable}, sigvocab.TaskState{Handler: sigvocab.DispIgnore, NSInit: true}},
		{"blocked and in real_blocked: blocked, not waited", sigvocab.TaskSnapshot{Blocked: term, RealBlocked: term}, sigvocab.TaskState{Blocked: true}},
		{"exiting", sigvocab.TaskSnapshot{SigFlags: sigvocab.SignalGroupExit}, sigvocab.TaskState{Exiting: true}},
		{"another signal handled", sigvocab.TaskSnapshot{Handled: sigvocab.NewSignalSet(sigvocab.SIGINT)}, sigvocab.TaskState{}},
		{"one-shot handler", sigvocab.TaskSnapshot{Handled: term, OneShot: term, SigFlags: sigvocab.SignalUnkillable}, sigvocab.TaskState{Handler: sigvocab.DispHandler, OneShot: true, NSInit: true}},
		{"another signal's handler one-shot", sigvocab.TaskSnapshot{Handled: term | sigvocab.NewSignalSet(sigvocab.SIGINT), OneShot: sigvocab.NewSignalSet(sigvocab.SIGINT)}, sigvocab.TaskState{Handler: sigvocab.DispHandler}},
	}
	for _, c := range cases {
		if got := c.s.State(sigvocab.SIGTERM); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestDecodeTaskStates(t *testing.T) {
	r := taskstateTaskState{Pid: 42, NsPid: 1, Pidns: 4026532180, SigFlags: 0x40, Blocked: 1 << 14, Handled: 1<<1 | 1<<14, Ignored: 1 << 2, Resethand: 1 << 14}
	copy(r.Comm[:], []int8{'t', 'i', 'n', 'i'})
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&r)), taskStateSize)
	raw = append(append([]byte{}, raw...), raw...) // the same record twice: one entry
	out := map[int]sigvocab.TaskSnapshot{}
	if err := decodeTaskStates(raw, out); err != nil {
		t.Fatal(err)
	}
	s, ok := out[42]
	if len(out) != 1 || !ok || s.NSPID != 1 || s.PidNS != 4026532180 || s.Comm.String() != "tini" ||
		s.Blocked != sigvocab.NewSignalSet(sigvocab.SIGTERM) || s.Handled != sigvocab.NewSignalSet(sigvocab.SIGINT, sigvocab.SIGTERM) || s.Ignored != sigvocab.NewSignalSet(sigvocab.SIGQUIT) ||
		s.OneShot != sigvocab.NewSignalSet(sigvocab.SIGTERM) || !s.NSInit() {
		t.Errorf("decoded %+v", out)
	}
	if err := decodeTaskStates(raw[:taskStateSize+3], out); err == nil {
		t.Error("a partial record must be an error")
	}
}

// The real iterator on real processes: this test binary (the Go runtime
// installs a SIGTERM handler), and a shell that is PID 1 of a new pid
// namespace and ignores SIGHUP.
func TestReadTaskStatesPrivileged(t *testing.T) {
	testutil.RequirePrivileged(t)
	init := testutil.StartNSInit(t, "trap '' HUP; echo ready; exec sleep 1000")
	missing := 1 << 22 // above PID_MAX_LIMIT: never a process

	start := time.Now()
	got, err := ReadTaskStates([]int{os.Getpid(), init.PID, missing, 0, -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("iterator loaded and read in %s", time.Since(start))
	if len(got) != 2 {
		t.Fatalf("got %d snapshots, want 2: %+v", len(got), got)
	}
	self := got[os.Getpid()]
	if st := self.State(sigvocab.SIGTERM); st.Handler != sigvocab.DispHandler || st.NSInit {
		t.Errorf("self: %+v, state %+v: the Go runtime handles SIGTERM and this is no init", self, st)
	}
	ns := got[init.PID]
	if ns.NSPID != 1 || !ns.NSInit() || ns.Comm.String() != "sleep" {
		t.Errorf("namespace init: %+v, want ns pid 1, SIGNAL_UNKILLABLE, comm sleep", ns)
	}
	// The inode /proc shows for the namespace.
	link, err := os.Readlink("/proc/" + strconv.Itoa(init.PID) + "/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	if want := "pid:[" + strconv.FormatUint(uint64(ns.PidNS), 10) + "]"; link != want {
		t.Errorf("pid namespace %s, /proc says %s", want, link)
	}
	// SIG_IGN survives exec; it is the kernel's disposition, not the shell's.
	if !ns.Ignored.Has(sigvocab.SIGHUP) || ns.Handled != 0 {
		t.Errorf("ignored %s handled %s, want SIGHUP ignored and no handler", ns.Ignored, ns.Handled)
	}
	if f := sigvocab.PredictFate(sigvocab.SIGTERM, ns.State(sigvocab.SIGTERM), true); f != sigvocab.FateDroppedInit {
		t.Errorf("SIGTERM to the namespace init: %s, want pid1_ignored", f)
	}
}

// sigwaitHelper makes this test binary, started with
// SIGSCOPE_TASKSTATE_HELPER=sigwait, a process that waits for SIGTERM in
// sigtimedwait() on its main thread, as tini does. It runs in init(), where
// the Go runtime keeps the main goroutine on the main thread (the leader,
// whose state the iterator reads), and never returns. tini itself is not in
// the busybox VMs of `make test-kernels`; this is.
func init() {
	if os.Getenv("SIGSCOPE_TASKSTATE_HELPER") != "sigwait" {
		return
	}
	var set unix.Sigset_t
	set.Val[0] = 1 << (sigvocab.SIGTERM - 1)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil); err != nil {
		os.Exit(3)
	}
	os.Stdout.WriteString("ready\n")
	for {
		// No timeout; EINTR (the runtime's own signals) waits again.
		unix.Syscall6(unix.SYS_RT_SIGTIMEDWAIT, uintptr(unsafe.Pointer(&set)), 0, 0, 8, 0, 0)
	}
}

// oneShotHelper makes this test binary, started with
// SIGSCOPE_TASKSTATE_HELPER=oneshot, a process whose SIGTERM handler is
// one-shot, as Node.js's is: it reads the Go runtime's own SIGTERM action
// and installs it again with SA_RESETHAND added (struct sigaction as
// rt_sigaction(2) takes it on amd64 and arm64: handler, flags, restorer,
// mask). SIGUSR1 keeps the runtime's handler as it is. Node.js is not in
// the busybox VMs of `make test-kernels`; this is.
func init() {
	if os.Getenv("SIGSCOPE_TASKSTATE_HELPER") != "oneshot" {
		return
	}
	var act [4]uint64
	if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sigvocab.SIGTERM), 0, uintptr(unsafe.Pointer(&act)), 8, 0, 0); e != 0 {
		os.Exit(3)
	}
	act[1] |= saResetHand
	if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sigvocab.SIGTERM), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0); e != 0 {
		os.Exit(4)
	}
	os.Stdout.WriteString("ready\n")
	for {
		time.Sleep(time.Hour)
	}
}

// saResetHand is SA_RESETHAND (include/uapi/asm-generic/signal-defs.h).
const saResetHand = 0x80000000

// A namespace init whose SIGTERM handler is one-shot: the iterator reads
// SA_RESETHAND from sa_flags, for that signal alone.
func TestReadTaskStatesOneShotPrivileged(t *testing.T) {
	testutil.RequirePrivileged(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	init := testutil.StartNSInit(t, "exec env SIGSCOPE_TASKSTATE_HELPER=oneshot "+self)
	got, err := ReadTaskStates([]int{init.PID, os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	s := got[init.PID]
	t.Logf("helper: handled %s, one-shot %s", s.Handled, s.OneShot)
	if !s.NSInit() || !s.Handled.Has(sigvocab.SIGTERM) || !s.Handled.Has(sigvocab.SIGUSR1) {
		t.Fatalf("%+v: want a namespace init with the Go runtime's handlers", s)
	}
	if s.OneShot != sigvocab.NewSignalSet(sigvocab.SIGTERM) {
		t.Errorf("one-shot %s, want SIGTERM alone", s.OneShot)
	}
	if st := s.State(sigvocab.SIGTERM); !st.OneShot || st.Handler != sigvocab.DispHandler {
		t.Errorf("SIGTERM state %+v, want a one-shot handler", st)
	}
	if st := s.State(sigvocab.SIGUSR1); st.OneShot {
		t.Errorf("SIGUSR1 state %+v, want a handler that stays", st)
	}
	// The test binary itself: the Go runtime's handlers, none one-shot.
	if me := got[os.Getpid()]; me.Handled == 0 || me.OneShot != 0 {
		t.Errorf("this test binary: handled %s, one-shot %s; want handlers, none one-shot", me.Handled, me.OneShot)
	}
}

// A process in sigtimedwait, read through the iterator: the waited set is
// in real_blocked, and /proc's SigBlk does not show it.
func TestReadTaskStatesSigwaitPrivileged(t *testing.T) {
	testutil.RequirePrivileged(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "SIGSCOPE_TASKSTATE_HELPER=sigwait")
	pid := testutil.StartReady(t, cmd)
	var s sigvocab.TaskSnapshot
	if !testutil.Poll(20*time.Millisecond, func() bool {
		var got map[int]sigvocab.TaskSnapshot
		got, err = ReadTaskStates([]int{pid})
		s = got[pid]
		return err != nil || s.Waited().Has(sigvocab.SIGTERM)
	}) {
		t.Fatalf("the helper never seen waiting for SIGTERM: %+v", s)
	}
	if err != nil {
		t.Fatal(err)
	}
	if s.Blocked.Has(sigvocab.SIGTERM) || s.NSInit() {
		t.Errorf("%+v: want SIGTERM out of blocked while waited for, no init", s)
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), "SigBlk:\t0000000000000000") {
		t.Errorf("SigBlk while waiting, want nothing blocked:\n%s", status)
	}
	// The Go runtime has a SIGTERM handler too; the wait comes first.
	if f := sigvocab.PredictFate(sigvocab.SIGTERM, s.State(sigvocab.SIGTERM), true); f != sigvocab.FateSigwait {
		t.Errorf("fate %s, want sigwait", f)
	}
}

func BenchmarkReadTaskStates(b *testing.B) {
	testutil.RequirePrivileged(b)
	pids := []int{os.Getpid(), os.Getppid()}
	for b.Loop() {
		if _, err := ReadTaskStates(pids); err != nil {
			b.Fatal(err)
		}
	}
}

// The agent audits every 30 s with one iterator kept loaded: a hundred
// reads load it once, each read answers for its own pids only (the last
// read's are taken out of the map), it grows when asked for more pids
// than it holds, and the heap after a hundred reads is what it was after
// one.
func TestTaskIterKeptLoadedPrivileged(t *testing.T) {
	testutil.RequirePrivileged(t)
	a := testutil.StartNSInit(t, "echo ready; exec sleep 1000")
	b := testutil.StartNSInit(t, "echo ready; exec sleep 1000")
	var it TaskIter
	defer it.Close()

	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	read := func(pids ...int) map[int]sigvocab.TaskSnapshot {
		t.Helper()
		got, err := it.Read(pids)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := read(a.PID); len(got) != 1 || got[a.PID].PID != a.PID {
		t.Fatalf("first read: %+v", got)
	}
	after1 := heap()
	for i := 0; i < 100; i++ {
		pid := []int{a.PID, b.PID}[i%2]
		if got := read(pid); len(got) != 1 || got[pid].PID != pid {
			t.Fatalf("read %d of pid %d: %+v (the last read's pid left in the map?)", i, pid, got)
		}
	}
	after100 := heap()
	if it.loads != 1 {
		t.Errorf("%d loads for 101 reads, want 1", it.loads)
	}
	t.Logf("heap after 1 read %d B, after 101 reads %d B", after1, after100)
	if after100 > after1+512<<10 {
		t.Errorf("heap grew by %d B over 100 reads: the iterator is reloaded, or a read leaks", after100-after1)
	}

	// More pids than the map holds: it is loaded again, larger.
	many := []int{a.PID, b.PID}
	for p := 1 << 21; len(many) < minTaskIterRoom+10; p++ {
		many = append(many, p) // no such processes: absent from the answer
	}
	if got := read(many...); len(got) != 2 {
		t.Errorf("read of %d pids: %d snapshots, want 2", len(many), len(got))
	}
	if it.loads != 2 || it.room < len(many) {
		t.Errorf("loads %d room %d after asking for %d pids", it.loads, it.room, len(many))
	}
}
