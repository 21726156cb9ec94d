package tracer

import (
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// defaultProcRoot is where /proc is mounted unless Options.procRoot says.
const defaultProcRoot = "/proc"

// completeOOMFrom fills the identity of an OOM victim reported by the older
// mark_victim prototype, which passes only a thread id: from the kernel's
// SIGKILL to the same thread just before (kill), else from procRoot.
func completeOOMFrom(e *sigvocab.Event, kill *sigvocab.Process, procRoot string) {
	if e.Target.PidNS != 0 || e.Target.TID == 0 {
		return
	}
	if kill.TID == e.Target.TID && kill.PidNS != 0 {
		e.Target = *kill
		if e.Target.NsPID == 1 {
			e.Flags |= sigvocab.FlagNSInit
		}
		return
	}
	completeOOMVictim(e, procRoot)
}

// completeOOMVictim fills the identity of an OOM victim reported by the older
// mark_victim prototype, which passes only a thread id. The kernel has just
// chosen the victim and not yet reaped it, but the reader may come after the
// reaper: this is the fallback when the victim's SIGKILL was not traced. OOM
// kills are rare: this /proc read is not on the hot path. procRoot is where
// /proc is mounted.
func completeOOMVictim(e *sigvocab.Event, procRoot string) {
	if e.Kind != sigvocab.KindOOM || e.Target.PidNS != 0 || e.Target.TID == 0 {
		return
	}
	dir := procRoot + "/" + strconv.FormatUint(uint64(e.Target.TID), 10)
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return // already gone: the tid is all we have
	}
	for _, line := range strings.Split(string(status), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) == 0 {
			continue
		}
		switch key {
		case "Name":
			copy(e.Target.Comm[:15], strings.TrimSpace(val))
		case "Tgid":
			if n, err := strconv.ParseUint(fields[0], 10, 32); err == nil {
				e.Target.PID = uint32(n)
			}
		case "NStgid": // the last one is the pid in its own namespace
			if n, err := strconv.ParseUint(fields[len(fields)-1], 10, 32); err == nil {
				e.Target.NsPID = uint32(n)
			}
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir+"/ns/pid", &st); err == nil {
		e.Target.PidNS = uint32(st.Ino)
	}
}
