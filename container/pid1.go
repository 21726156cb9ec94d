package container

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sigscope/sigscope/tracer"
)

// PID1Signals reads what a process does with each signal from
// procRoot/<pid>/status: the signals it has a handler for (SigCgt), ignores
// (SigIgn) and blocks (SigBlk, of its main thread), and its command line.
// The kernel's masks have bit n-1 for signal n, the layout of
// tracer.SignalSet. An empty procRoot means /proc.
//
// For a container's PID 1 this predicts a stop: a stop signal that is
// neither caught nor ignored is dropped by the kernel (a namespace init has
// no default action), so the runtime waits its timeout and SIGKILLs.
func PID1Signals(procRoot string, pid int) (caught, ignored, blocked tracer.SignalSet, cmdline []string, err error) {
	if procRoot == "" {
		procRoot = DefaultProcRoot
	}
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return 0, 0, 0, nil, err
	}
	found := 0
	for _, line := range strings.Split(string(status), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *tracer.SignalSet
		switch name {
		case "SigCgt":
			dst = &caught
		case "SigIgn":
			dst = &ignored
		case "SigBlk":
			dst = &blocked
		default:
			continue
		}
		mask, perr := strconv.ParseUint(strings.TrimSpace(val), 16, 64)
		if perr != nil {
			return 0, 0, 0, nil, fmt.Errorf("%s: %s: %w", filepath.Join(dir, "status"), name, perr)
		}
		*dst = tracer.SignalSet(mask)
		found++
	}
	if found != 3 {
		return 0, 0, 0, nil, fmt.Errorf("%s: SigCgt, SigIgn or SigBlk missing", filepath.Join(dir, "status"))
	}
	raw, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		return 0, 0, 0, nil, err
	}
	// NUL-separated, with a trailing NUL; empty for a zombie.
	if s := strings.TrimRight(string(raw), "\x00"); s != "" {
		cmdline = strings.Split(s, "\x00")
	}
	return caught, ignored, blocked, cmdline, nil
}
