package sigvocab

import (
	"fmt"
	"strconv"
	"strings"
)

// Signal is a Linux signal number (1-64).
type Signal int32

// Signal numbers used by the classification rules and defaults (x86-64 and
// arm64 share them).
const (
	SIGHUP    Signal = 1
	SIGINT    Signal = 2
	SIGQUIT   Signal = 3
	SIGKILL   Signal = 9
	SIGUSR1   Signal = 10
	SIGUSR2   Signal = 12
	SIGALRM   Signal = 14
	SIGTERM   Signal = 15
	SIGCHLD   Signal = 17
	SIGCONT   Signal = 18
	SIGSTOP   Signal = 19
	SIGURG    Signal = 23
	SIGVTALRM Signal = 26
	SIGPROF   Signal = 27
	SIGWINCH  Signal = 28
)

// MaxSignal is the highest signal number the kernel knows (_NSIG).
const MaxSignal = 64

var signalNames = [...]string{
	1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT",
	7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2",
	13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM", 16: "SIGSTKFLT", 17: "SIGCHLD",
	18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP", 21: "SIGTTIN", 22: "SIGTTOU",
	23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ", 26: "SIGVTALRM", 27: "SIGPROF",
	28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR", 31: "SIGSYS",
}

// glibc reserves 32 and 33 and calls 34 SIGRTMIN; kill -l and strace agree.
const rtmin = 34

// String returns the conventional name: "SIGTERM", "SIGRTMIN+3", or "SIG33".
// It allocates nothing for a signal number the kernel knows (0 to
// MaxSignal): the JSON writers name one per event or container.
func (s Signal) String() string {
	if s >= 0 && s <= MaxSignal {
		return signalNameTable[s]
	}
	return s.name()
}

// signalNameTable is the name of every signal number the kernel knows,
// computed once.
var signalNameTable = func() (t [MaxSignal + 1]string) {
	for s := range t {
		t[s] = Signal(s).name()
	}
	return t
}()

// name is String, computed.
func (s Signal) name() string {
	switch {
	case s > 0 && int(s) < len(signalNames) && signalNames[s] != "":
		return signalNames[s]
	case s >= rtmin && s <= MaxSignal:
		if s == rtmin {
			return "SIGRTMIN"
		}
		return "SIGRTMIN+" + strconv.Itoa(int(s-rtmin))
	default:
		return "SIG" + strconv.Itoa(int(s))
	}
}

// ParseSignal accepts "SIGTERM", "TERM", "term", "15" or "SIGRTMIN+2".
func ParseSignal(s string) (Signal, error) {
	in := strings.ToUpper(strings.TrimSpace(s))
	if n, err := strconv.Atoi(in); err == nil {
		if n < 1 || n > MaxSignal {
			return 0, fmt.Errorf("signal %d out of range 1-%d", n, MaxSignal)
		}
		return Signal(n), nil
	}
	if !strings.HasPrefix(in, "SIG") {
		in = "SIG" + in
	}
	for n := Signal(1); n <= MaxSignal; n++ {
		if n.String() == in {
			return n, nil
		}
	}
	return 0, fmt.Errorf("unknown signal %q", s)
}

// SignalSet is a set of signals, bit (signo-1) for each member; the same
// layout the BPF programs test against.
type SignalSet uint64

// AllSignals traces every signal, SIGCHLD and friends included.
const AllSignals SignalSet = ^SignalSet(0)

// DefaultSignals is every signal but the chatty ones that say nothing about
// who stops whom: child notifications, urgent data (the Go runtime's
// preemption signal), window changes, continues and interval timers.
var DefaultSignals = AllSignals.Without(SIGCHLD, SIGURG, SIGWINCH, SIGCONT, SIGALRM, SIGVTALRM, SIGPROF)

// NewSignalSet returns the set holding sigs.
func NewSignalSet(sigs ...Signal) SignalSet {
	var s SignalSet
	for _, sig := range sigs {
		if sig >= 1 && sig <= MaxSignal {
			s |= 1 << (sig - 1)
		}
	}
	return s
}

// Without returns s less sigs.
func (s SignalSet) Without(sigs ...Signal) SignalSet { return s &^ NewSignalSet(sigs...) }

// Has reports whether sig is in s.
func (s SignalSet) Has(sig Signal) bool {
	return sig >= 1 && sig <= MaxSignal && s&(1<<(sig-1)) != 0
}

// String lists the members, or "all".
func (s SignalSet) String() string {
	if s == AllSignals {
		return "all"
	}
	var names []string
	for n := Signal(1); n <= MaxSignal; n++ {
		if s.Has(n) {
			names = append(names, n.String())
		}
	}
	return strings.Join(names, ",")
}

// ParseSignalSet reads a --signals value: "" or "default" for
// [DefaultSignals], "all", or a comma-separated list of names and numbers.
func ParseSignalSet(v string) (SignalSet, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "default":
		return DefaultSignals, nil
	case "all":
		return AllSignals, nil
	}
	var s SignalSet
	for _, part := range strings.Split(v, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		sig, err := ParseSignal(part)
		if err != nil {
			return 0, err
		}
		s |= NewSignalSet(sig)
	}
	if s == 0 {
		return 0, fmt.Errorf("empty signal list %q", v)
	}
	return s, nil
}

// defaultIgnored reports whether the signal's default action is to ignore it
// (kernel sig_kernel_ignore): such a drop says nothing about PID 1.
func defaultIgnored(sig Signal) bool {
	return sig == SIGCHLD || sig == SIGCONT || sig == SIGWINCH || sig == SIGURG
}
