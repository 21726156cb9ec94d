package procsig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// ProcSignals is what procRoot/<pid>/status and cmdline say about how a
// process takes signals. The kernel's masks have bit n-1 for signal n, the
// layout of sigvocab.SignalSet.
//
// It is the fallback of the audit, which prefers the kernel's own state
// (tracer.ReadTaskStates): /proc shows `blocked` but not `real_blocked`, so
// a process waiting in sigtimedwait() for a signal (tini, docker-init) looks
// here as if it had no use for it.
type ProcSignals struct {
	Caught  sigvocab.SignalSet // SigCgt: a user handler is installed
	Ignored sigvocab.SignalSet // SigIgn: SIG_IGN
	Blocked sigvocab.SignalSet // SigBlk of the main thread
	NSPID   int                // last NSpid field: the pid in its own pid namespace; 0 when status has no NSpid (before Linux 4.1)
	Comm    string             // Name
	Cmdline []string           // nil for a zombie or a kernel thread
}

// NSInit reports whether the process is the init of its pid namespace:
// its pid there is 1.
func (p *ProcSignals) NSInit() bool { return p.NSPID == 1 }

// State is the sigvocab.TaskState /proc can show for sig: the disposition,
// blocked and whether the process is an init. Waited is always false
// (real_blocked is not shown) and so is Exiting.
func (p *ProcSignals) State(sig sigvocab.Signal) sigvocab.TaskState {
	st := sigvocab.TaskState{Blocked: p.Blocked.Has(sig), NSInit: p.NSInit()}
	switch {
	case p.Caught.Has(sig):
		st.Handler = sigvocab.DispHandler
	case p.Ignored.Has(sig):
		st.Handler = sigvocab.DispIgnore
	}
	return st
}

// ReadProcSignals reads procRoot/<pid>/status and cmdline. An empty
// procRoot means /proc.
func ReadProcSignals(procRoot string, pid int) (*ProcSignals, error) {
	dir := procDir(procRoot, pid)
	path := filepath.Join(dir, "status")
	status, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p := &ProcSignals{}
	found := 0
	for _, line := range strings.Split(string(status), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		var dst *sigvocab.SignalSet
		switch name {
		case "Name":
			p.Comm = val
			continue
		case "NSpid":
			f := strings.Fields(val)
			if len(f) == 0 {
				return nil, fmt.Errorf("%s: empty NSpid", path)
			}
			if p.NSPID, err = strconv.Atoi(f[len(f)-1]); err != nil {
				return nil, fmt.Errorf("%s: NSpid: %w", path, err)
			}
			continue
		case "SigCgt":
			dst = &p.Caught
		case "SigIgn":
			dst = &p.Ignored
		case "SigBlk":
			dst = &p.Blocked
		default:
			continue
		}
		mask, perr := strconv.ParseUint(val, 16, 64)
		if perr != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, name, perr)
		}
		*dst = sigvocab.SignalSet(mask)
		found++
	}
	if found != 3 {
		return nil, fmt.Errorf("%s: SigCgt, SigIgn or SigBlk missing", path)
	}
	if p.Cmdline, err = Cmdline(procRoot, pid); err != nil {
		return nil, err
	}
	return p, nil
}

// PID1Signals reads what a process does with each signal (ReadProcSignals)
// and its command line. For a container's PID 1 this predicts a stop: a
// stop signal that is neither caught nor ignored is dropped by the kernel
// (a namespace init has no default action), unless the init waits for it
// with sigtimedwait(), which /proc does not show.
func PID1Signals(procRoot string, pid int) (caught, ignored, blocked sigvocab.SignalSet, cmdline []string, err error) {
	p, err := ReadProcSignals(procRoot, pid)
	if err != nil {
		return 0, 0, 0, nil, err
	}
	return p.Caught, p.Ignored, p.Blocked, p.Cmdline, nil
}

// Cmdline reads procRoot/<pid>/cmdline: nil for a zombie or a kernel
// thread.
func Cmdline(procRoot string, pid int) ([]string, error) {
	raw, err := os.ReadFile(filepath.Join(procDir(procRoot, pid), "cmdline"))
	if err != nil {
		return nil, err
	}
	// NUL-separated, with a trailing NUL.
	if s := strings.TrimRight(string(raw), "\x00"); s != "" {
		return strings.Split(s, "\x00"), nil
	}
	return nil, nil
}

// signalfdLink is what readlink(2) of a signalfd's /proc/PID/fd entry says.
const signalfdLink = "anon_inode:[signalfd]"

// SignalfdMask returns the signals the process's signalfds watch: the union
// of the "sigmask:" lines of procRoot/<pid>/fdinfo/<fd> for each fd whose
// link is anon_inode:[signalfd]. A signal that is blocked and watched is
// read from the fd by the process (catatonit waits so), whatever its
// handler. Reading another process's fds needs ptrace read access: a
// permission error says so (NeedsPtrace), rather than reading as no
// signalfd.
func SignalfdMask(procRoot string, pid int) (sigvocab.SignalSet, error) {
	dir := procDir(procRoot, pid)
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return 0, NeedsPtrace(err)
	}
	var set sigvocab.SignalSet
	for _, fd := range fds {
		// An fd closed since ReadDir is simply not counted. Listing the
		// directory needs no ptrace access, reading its links does.
		l, err := os.Readlink(filepath.Join(dir, "fd", fd.Name()))
		if errors.Is(err, fs.ErrPermission) {
			return 0, NeedsPtrace(err)
		}
		if err != nil || l != signalfdLink {
			continue
		}
		info, err := os.ReadFile(filepath.Join(dir, "fdinfo", fd.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "sigmask:"); ok {
				mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				if err != nil {
					return 0, fmt.Errorf("%s: sigmask: %w", filepath.Join(dir, "fdinfo", fd.Name()), err)
				}
				set |= sigvocab.SignalSet(mask)
			}
		}
	}
	return set, nil
}

// NeedsPtrace names what a permission error reading another process's
// /proc/PID/ns or /proc/PID/fd entries lacks: the kernel guards them with a
// ptrace access check (PTRACE_MODE_READ), which uid 0 fails without
// CAP_SYS_PTRACE for a process holding a capability it does not (a
// container's, a runtime's). Other errors are returned as they are.
func NeedsPtrace(err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%w (the kernel's ptrace access check: needs CAP_SYS_PTRACE)", err)
	}
	return err
}

func procDir(procRoot string, pid int) string {
	if procRoot == "" {
		procRoot = "/proc"
	}
	return filepath.Join(procRoot, strconv.Itoa(pid))
}
