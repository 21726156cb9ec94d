package sigvocab

import (
	"strings"
	"time"
)

// Kind says which tracepoint produced an event. Its values are the C enum
// event_type of bpf/sigscope.h (tracer's vocab_test.go holds them to the
// bpf2go output), numbered from 0 without a gap: the kernel's counters and
// tracer's Stats are arrays indexed by it.
type Kind uint8

const (
	KindGenerate Kind = 0 // signal_generate: a signal was sent
	KindDeliver  Kind = 1 // signal_deliver: a task dequeued it
	KindExit     Kind = 2 // sched_process_exit: a process ended
	KindOOM      Kind = 3 // oom:mark_victim: the OOM killer chose a victim
	KindExec     Kind = 4 // sched_process_exec: a process entered a container's pid namespace from outside and ran a program
	// KindNSEmpty: a dying pid namespace init notified its parent, which the
	// kernel does only once every other process of the namespace has been
	// killed (the cascade) and reaped. Target is the init, Sender its parent.
	KindNSEmpty Kind = 5
	// KindNet is what the kernel counted of one stopping network
	// namespace's TCP connections (the stopping_nets map), read by user
	// space when the stop is over: no program emits it. NetNS is the
	// namespace, Conns the counts.
	KindNet Kind = 6
	// KindBlocked is what one task of a namespace init's process was doing
	// when a stop signal or SIGKILL came to the init from outside: the
	// kernel writes one per task (the main thread, a few others, a few
	// children) right after that signal's generate record, with its time
	// stamp (BootNS). Target is the task, Task the rest (blocked.go).
	KindBlocked Kind = 7
)

// kindNames is the one list of kinds: adding one is a constant above, its
// name here, and the C side (enum event_type, the program that emits it).
var kindNames = [...]string{
	KindGenerate: "generate",
	KindDeliver:  "deliver",
	KindExit:     "exit",
	KindOOM:      "oom",
	KindExec:     "exec",
	KindNSEmpty:  "ns_empty",
	KindNet:      "net",
	KindBlocked:  "blocked",
}

// NumKinds is the number of kinds: every Kind below it is one.
const NumKinds = len(kindNames)

// Kinds lists every kind, in counter order.
var Kinds = func() []Kind {
	ks := make([]Kind, NumKinds)
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}()

// RingKinds lists the kinds the kernel writes to the ring buffer, in
// counter order: every kind but KindNet, which user space reads from a map.
var RingKinds = func() []Kind {
	var ks []Kind
	for _, k := range Kinds {
		if k != KindNet {
			ks = append(ks, k)
		}
	}
	return ks
}()

// Valid reports whether k is a kind this package knows.
func (k Kind) Valid() bool { return int(k) < NumKinds }

func (k Kind) String() string {
	if k.Valid() {
		return kindNames[k]
	}
	return "unknown"
}

// Result is the kernel's verdict on a generated signal (TRACE_SIGNAL_*).
type Result uint8

const (
	ResultDelivered      Result = 0
	ResultIgnored        Result = 1
	ResultAlreadyPending Result = 2
	ResultOverflowFail   Result = 3
	ResultLoseInfo       Result = 4
)

var resultNames = [...]string{"delivered", "ignored", "already_pending", "overflow_fail", "lose_info"}

func (r Result) String() string {
	if int(r) < len(resultNames) {
		return resultNames[r]
	}
	return "unknown"
}

// Disposition is what the receiving task had installed for the signal.
type Disposition uint8

const (
	DispDefault Disposition = 0 // SIG_DFL
	DispIgnore  Disposition = 1 // SIG_IGN
	DispHandler Disposition = 2 // a user handler
)

func (d Disposition) String() string {
	switch d {
	case DispDefault:
		return "default"
	case DispIgnore:
		return "ignore"
	case DispHandler:
		return "handler"
	}
	return "unknown"
}

// CodeClass groups si_code values by who or what originated the signal.
type CodeClass uint8

const (
	CodeUser   CodeClass = iota // kill(2), pidfd_send_signal, SEND_SIG_NOINFO
	CodeKernel                  // the kernel: faults, SIGCHLD, OOM, cascade, SEND_SIG_PRIV
	CodeQueue                   // sigqueue(3), message queues
	CodeTimer                   // POSIX timers
	CodeTkill                   // tgkill(2)/tkill(2)
)

func (c CodeClass) String() string {
	return [...]string{"user", "kernel", "queue", "timer", "tkill"}[c]
}

// CodeOf maps a raw si_code to its class (include/uapi/asm-generic/siginfo.h).
func CodeOf(siCode int32) CodeClass {
	switch siCode {
	case 0: // SI_USER
		return CodeUser
	case -1, -3: // SI_QUEUE, SI_MESGQ
		return CodeQueue
	case -2: // SI_TIMER
		return CodeTimer
	case -6: // SI_TKILL
		return CodeTkill
	}
	return CodeKernel // SI_KERNEL, positive fault/child codes, SI_SIGIO, SI_ASYNCIO, ...
}

// Comm is a task name as the kernel stores it: up to 15 bytes, NUL padded.
// It is untrusted: any process can set it to control bytes or invalid UTF-8.
type Comm [16]byte

// String returns the bytes up to the first NUL, unescaped.
func (c Comm) String() string {
	for i, b := range c {
		if b == 0 {
			return string(c[:i])
		}
	}
	return string(c[:])
}

// HostPidNS is the inode of the host's (initial) pid namespace,
// PROC_PID_INIT_INO in the kernel: the same constant on every kernel, so a
// process of the host is recognisable from the event alone.
const HostPidNS = 0xEFFFFFFC

// Process identifies a task as the kernel saw it at the event.
type Process struct {
	PID        uint32 // host tgid
	TID        uint32 // host thread id
	NsPID      uint32 // tgid inside the process's own pid namespace
	PidNS      uint32 // inode of that pid namespace (/proc/PID/ns/pid)
	CgroupID   uint64 // cgroup v2 id; 0 or 1 when the task has no v2 identity
	CgroupV1ID uint64 // cgroup v1 memory controller directory inode; 0 when absent
	Comm       Comm
}

// Ancestor is one of the sender's parents.
type Ancestor struct {
	PID  uint32
	Comm Comm
}

// MaxAncestors is how many of the sender's parents an event carries
// (MAX_ANCESTORS in bpf/sigscope.h).
const MaxAncestors = 4

// Event is one decoded record (tracer.Decode) or one line of a recording
// ([Event.UnmarshalJSON]). The tracer reuses the same value for every event
// its Run callback sees: copy it to keep it.
type Event struct {
	Time   time.Time // wall-clock time of the kernel event
	BootNS uint64    // the kernel's CLOCK_BOOTTIME timestamp
	Kind   Kind

	// Signal is the signal generated or delivered; for an exit event, the
	// signal that killed the process (0 when it exited).
	Signal  Signal
	Result  Result      // generate only
	Group   bool        // generate: process-directed (kill, pidfd) rather than thread-directed
	SiCode  int32       // raw si_code
	Code    CodeClass   // class of SiCode
	Handler Disposition // the receiver's disposition for Signal (generate, deliver)
	Flags   Flags       // the verdict words, see classify.go
	Fate    Fate        // generate, deliver: what the kernel did with the signal (fate.go)

	Facts    uint32 // raw facts recorded in BPF (FACT_* in bpf/sigscope.h)
	SigFlags uint32 // target->signal->flags at the event

	Sender         Process // generate: the task that sent the signal; exec: the parent that started it, outside the namespace; ns_empty: the init's parent
	SenderExiting  bool    // the sender was itself exiting (PF_EXITING)
	Ancestors      [MaxAncestors]Ancestor
	AncestorsCount int
	Target         Process // generate: the target; deliver: the receiver; exit: the process; oom: the victim; exec: the process (its new comm); ns_empty: the init

	ExitCode   int  // exit only: the exit status when the process exited, -1 when a signal killed it
	CoreDumped bool // exit only

	// NetNS is the inode of a network namespace (/proc/PID/ns/net) whose
	// TCP connections the kernel counts: on a generate event, the target's
	// when this signal (a stop signal from another network namespace) began
	// or found the count (FactNetWatched), or the namespace it shares with
	// its sender (FlagNetShared: not counted), else 0; on an exec event, the
	// process's (a preStop hook's: the pipeline may begin the count at
	// it); on a net event, the namespace counted.
	NetNS uint32
	// Conns is a net event's counts; nil for every other kind.
	Conns *Connections
	// Task is a blocked event's reading of its task (Target).
	Task TaskReading

	// Raw is the record as the kernel wrote it; valid only during the callback.
	Raw []byte
}

// SenderAncestors returns the recorded ancestors, nearest first.
func (e *Event) SenderAncestors() []Ancestor { return e.Ancestors[:e.AncestorsCount] }

// Signaled reports whether an exit event's process was killed by a signal.
func (e *Event) Signaled() bool { return e.Kind == KindExit && e.Signal != 0 }

// Flags is the set of verdict words attached to an event.
type Flags uint16

const (
	FlagPID1Ignored   Flags = 1 << iota // a namespace init dropped it: no handler installed
	FlagSigIgn                          // the target had SIG_IGN installed
	FlagTargetExiting                   // dropped because the target was already exiting
	FlagBlocked                         // the target blocked it: queued, not acted on yet
	FlagNSCascade                       // SIGKILL sent by an exiting init to its namespace
	FlagCrossNS                         // the sender has no pid in the target's namespace
	FlagNSInit                          // the target is its pid namespace's init
	FlagSigwaited                       // the target waits for it in sigtimedwait: queued for the waiter
	FlagCgroupKill                      // SIGKILL from a write to cgroup.kill (runc 1.2+ killing a container)
	FlagTargetGone                      // every thread of the target had exited: a signal to a zombie
	// FlagNetShared: the target shares its network namespace with the
	// runtime that signalled or started it (--network host, a pod's
	// hostNetwork), so its connections cannot be told from the node's:
	// the kernel does not count them for its stop.
	FlagNetShared
)

var flagNames = [...]string{"pid1_ignored", "sig_ign", "target_exiting", "blocked", "ns_cascade", "cross_ns", "ns_init", "sigwaited", "cgroup_kill", "target_gone", "net_shared"}

// FlagNames lists every flag word, in bit order.
func FlagNames() []string { return append([]string(nil), flagNames[:]...) }

// Has reports whether every flag in g is set.
func (f Flags) Has(g Flags) bool { return f&g == g }

// Words returns the flag names in bit order.
func (f Flags) Words() []string {
	words := make([]string, 0, 4)
	for i, n := range flagNames {
		if f&(1<<i) != 0 {
			words = append(words, n)
		}
	}
	return words
}

func (f Flags) String() string { return strings.Join(f.Words(), ",") }

// ParseFlag returns the flag named w.
func ParseFlag(w string) (Flags, bool) {
	for i, n := range flagNames {
		if n == w {
			return 1 << i, true
		}
	}
	return 0, false
}
