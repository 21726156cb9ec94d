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
		return fmt.Errorf("%w: kernel too old: the BPF ring buffer needs Linux 5.8 or later, and sigscope needs 5.11 (%v)", ErrUnsupported, err)
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

// exitHasGroupDead reports whether sched_process_exit passes
// (task, bool group_dead), as it does from 6.16. The kernel's BTF typedef
// btf_trace_sched_process_exit is a pointer to a prototype whose first
// parameter is the tracepoint's context: 3 parameters on 6.16+, 2 before.
// The answer comes from the running kernel, never from its version number.
func exitHasGroupDead(spec *btf.Spec) (bool, error) {
	var td *btf.Typedef
	if err := spec.TypeByName("btf_trace_sched_process_exit", &td); err != nil {
		return false, fmt.Errorf("%w: sched_process_exit tracepoint not in kernel BTF: %v", ErrUnsupported, err)
	}
	return groupDeadFromTypedef(td)
}

func groupDeadFromTypedef(td *btf.Typedef) (bool, error) {
	ptr, ok := td.Type.(*btf.Pointer)
	if !ok {
		return false, fmt.Errorf("btf_trace_sched_process_exit: unexpected %T", td.Type)
	}
	proto, ok := ptr.Target.(*btf.FuncProto)
	if !ok {
		return false, fmt.Errorf("btf_trace_sched_process_exit: unexpected %T", ptr.Target)
	}
	switch len(proto.Params) {
	case 2:
		return false, nil
	case 3:
		return true, nil
	}
	return false, fmt.Errorf("btf_trace_sched_process_exit: %d parameters, want 2 or 3", len(proto.Params))
}
