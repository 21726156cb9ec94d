package tracer

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/sigscope/sigscope/internal/testutil"
)

// What the task iterator printed for docker-init (tini) waiting in
// sigtimedwait, on 6.18 (the kernel facts note): blocked empty, the waited
// set in real_blocked, SIGNAL_UNKILLABLE, SIG_DFL everywhere.
func TestTaskSnapshotStateTini(t *testing.T) {
	s := TaskSnapshot{SigFlags: signalUnkillable, RealBlocked: 0xfffffffe3fcbfa07}
	st := s.State(SIGTERM)
	if !st.Waited || st.Blocked || !st.NSInit || st.Exiting || st.Handler != DispDefault {
		t.Fatalf("state %+v, want waited SIGTERM at an init with SIG_DFL", st)
	}
	if f := PredictFate(SIGTERM, st, true); f != FateSigwait {
		t.Errorf("fate %s, want sigwait", f)
	}
	// Between two sigtimedwait calls tini blocks everything instead.
	s.Blocked, s.RealBlocked = s.RealBlocked, 0
	if st := s.State(SIGTERM); !st.Blocked || st.Waited {
		t.Errorf("blocked tini: %+v", st)
	}
}

func TestTaskSnapshotState(t *testing.T) {
	term := NewSignalSet(SIGTERM)
	cases := []struct {
		name string
		s    TaskSnapshot
		want TaskState
	}{
		{"handler", TaskSnapshot{Handled: term}, TaskState{Handler: DispHandler}},
		{"SIG_IGN at an init", TaskSnapshot{Ignored: term, SigFlags: signalUnkillable}, TaskState{Handler: DispIgnore, NSInit: true}},
		{"blocked and in real_blocked: blocked, not waited", TaskSnapshot{Blocked: term, RealBlocked: term}, TaskState{Blocked: true}},
		{"exiting", TaskSnapshot{SigFlags: signalGroupExit}, TaskState{Exiting: true}},
		{"another signal handled", TaskSnapshot{Handled: NewSignalSet(SIGINT)}, TaskState{}},
	}
	for _, c := range cases {
		if got := c.s.State(SIGTERM); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestDecodeTaskStates(t *testing.T) {
	r := taskstateTaskState{Pid: 42, NsPid: 1, Pidns: 4026532180, SigFlags: 0x40, Blocked: 1 << 14, Handled: 1 << 1, Ignored: 1 << 2}
	copy(r.Comm[:], []int8{'t', 'i', 'n', 'i'})
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&r)), taskStateSize)
	raw = append(append([]byte{}, raw...), raw...) // the same record twice: one entry
	out := map[int]TaskSnapshot{}
	if err := decodeTaskStates(raw, out); err != nil {
		t.Fatal(err)
	}
	s, ok := out[42]
	if len(out) != 1 || !ok || s.NSPID != 1 || s.PidNS != 4026532180 || s.Comm.String() != "tini" ||
		s.Blocked != NewSignalSet(SIGTERM) || s.Handled != NewSignalSet(SIGINT) || s.Ignored != NewSignalSet(SIGQUIT) || !s.NSInit() {
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
	if st := self.State(SIGTERM); st.Handler != DispHandler || st.NSInit {
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
	if !ns.Ignored.Has(SIGHUP) || ns.Handled != 0 {
		t.Errorf("ignored %s handled %s, want SIGHUP ignored and no handler", ns.Ignored, ns.Handled)
	}
	if f := PredictFate(SIGTERM, ns.State(SIGTERM), true); f != FateDroppedInit {
		t.Errorf("SIGTERM to the namespace init: %s, want pid1_ignored", f)
	}
}

// A process in sigtimedwait, read through the iterator: the waited set is
// in real_blocked, and /proc's SigBlk does not show it.
func TestReadTaskStatesSigwaitPrivileged(t *testing.T) {
	testutil.RequirePrivileged(t)
	if _, err := exec.LookPath("tini"); err != nil {
		t.Skip("tini not installed (apt-get install tini)")
	}
	init := testutil.StartNSInit(t, "echo ready; exec tini -s -- sleep 1000")
	var s TaskSnapshot
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := ReadTaskStates([]int{init.PID})
		if err != nil {
			t.Fatal(err)
		}
		s = got[init.PID]
		if s.Comm.String() == "tini" && s.Waited().Has(SIGTERM) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tini never seen waiting for SIGTERM: %+v", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(init.PID) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), "SigBlk:\t0000000000000000") {
		t.Logf("tini's SigBlk while waiting (a read between two waits shows all blocked):\n%s", status)
	}
	if f := PredictFate(SIGTERM, s.State(SIGTERM), true); f != FateSigwait {
		t.Errorf("fate %s, want sigwait", f)
	}
}

func BenchmarkReadTaskStates(b *testing.B) {
	testutil.RequirePrivileged(b)
	pids := []int{os.Getpid(), 1}
	for b.Loop() {
		if _, err := ReadTaskStates(pids); err != nil {
			b.Fatal(err)
		}
	}
}
