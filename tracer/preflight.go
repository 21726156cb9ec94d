package tracer

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
)

// ErrUnsupported wraps every "this kernel or process cannot run sigscope"
// error, so callers can tell setup problems from bugs.
var ErrUnsupported = errors.New("cannot trace")

const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// Paths read by preflight; variables so that tests can point them elsewhere.
var (
	btfPath      = "/sys/kernel/btf/vmlinux"
	lockdownPath = "/sys/kernel/security/lockdown"
)

// preflight names the first thing that will make loading fail. cilium/ebpf's
// own errors are accurate but hard to act on: an EPERM from a missing
// CAP_PERFMON reads as a MEMLOCK hint, for instance.
func preflight() error {
	if _, err := os.Stat(btfPath); err != nil {
		return fmt.Errorf("%w: the kernel has no BTF (%s: %v); sigscope needs a kernel built with CONFIG_DEBUG_INFO_BTF=y",
			ErrUnsupported, btfPath, err)
	}
	if err := checkCapabilities(); err != nil {
		return err
	}
	if mode, err := lockdownMode(); err == nil && mode == "confidentiality" {
		return fmt.Errorf("%w: kernel lockdown is in confidentiality mode, which forbids the BPF programs reading kernel memory", ErrUnsupported)
	}
	if err := features.HaveMapType(ebpf.RingBuf); err != nil {
		return fmt.Errorf("%w: kernel too old: the BPF ring buffer needs Linux 5.8 or later, and sigscope needs 5.10 (%v)", ErrUnsupported, err)
	}
	return nil
}

// checkCapabilities requires CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN, which
// implies both) in the effective set, and says which one is missing.
func checkCapabilities() error {
	eff, err := effectiveCaps()
	if err != nil {
		return nil // cannot tell; let the load report what happens
	}
	has := func(c uint) bool { return eff&(1<<c) != 0 }
	if has(capSysAdmin) || (has(capBPF) && has(capPerfmon)) {
		return nil
	}
	var missing []string
	if !has(capBPF) {
		missing = append(missing, "CAP_BPF")
	}
	if !has(capPerfmon) {
		missing = append(missing, "CAP_PERFMON")
	}
	who := "this process"
	if os.Geteuid() != 0 {
		who = fmt.Sprintf("this process (uid %d, not root)", os.Geteuid())
	}
	return fmt.Errorf("%w: %s lacks %s; run as root or grant CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN)",
		ErrUnsupported, who, strings.Join(missing, " and "))
}

func effectiveCaps() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("no CapEff in /proc/self/status")
}

// lockdownMode returns the active mode ("none", "integrity", "confidentiality").
func lockdownMode() (string, error) {
	b, err := os.ReadFile(lockdownPath)
	if err != nil {
		return "", err
	}
	s := string(b)
	if i := strings.IndexByte(s, '['); i >= 0 {
		if j := strings.IndexByte(s[i:], ']'); j > 0 {
			return s[i+1 : i+j], nil
		}
	}
	return "", errors.New("unrecognised lockdown file")
}

// tracepointParams returns the parameter count of a tp_btf hook's prototype
// from the kernel's BTF typedef btf_trace_<name>, context included. Hooks
// whose arguments changed between kernels are chosen by this, never by the
// kernel's version number.
func tracepointParams(spec *btf.Spec, name string) (int, error) {
	var td *btf.Typedef
	if err := spec.TypeByName("btf_trace_"+name, &td); err != nil {
		return 0, fmt.Errorf("%w: tracepoint %s not in kernel BTF: %v", ErrUnsupported, name, err)
	}
	return protoParams(td)
}

func protoParams(td *btf.Typedef) (int, error) {
	ptr, ok := td.Type.(*btf.Pointer)
	if !ok {
		return 0, fmt.Errorf("%s: unexpected %T", td.Name, td.Type)
	}
	proto, ok := ptr.Target.(*btf.FuncProto)
	if !ok {
		return 0, fmt.Errorf("%s: unexpected %T", td.Name, ptr.Target)
	}
	return len(proto.Params), nil
}

// exitHasGroupDead reports whether sched_process_exit passes
// (task, bool group_dead), as it does from 6.16: 3 parameters with the
// context, 2 before.
func exitHasGroupDead(spec *btf.Spec) (bool, error) {
	n, err := tracepointParams(spec, "sched_process_exit")
	if err != nil {
		return false, err
	}
	return groupDeadFromParams(n)
}

func groupDeadFromParams(n int) (bool, error) {
	switch n {
	case 2:
		return false, nil
	case 3:
		return true, nil
	}
	return false, fmt.Errorf("btf_trace_sched_process_exit: %d parameters, want 2 or 3", n)
}

// oomPassesTask reports whether oom:mark_victim passes (task, uid), as
// Debian's 6.1, 6.12 and 6.18 kernels do, rather than only (int pid), as
// older upstream kernels do: 3 parameters against 2.
func oomPassesTask(spec *btf.Spec) (bool, error) {
	n, err := tracepointParams(spec, "mark_victim")
	if err != nil {
		return false, err
	}
	switch n {
	case 2:
		return false, nil
	case 3:
		return true, nil
	}
	return false, fmt.Errorf("btf_trace_mark_victim: %d parameters, want 2 or 3", n)
}
