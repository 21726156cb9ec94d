package tracer

import (
	"fmt"
	"github.com/sigscope/sigscope/internal/sigvocab"
	"time"
	"unsafe"
)

// RecordSize is the size of one kernel record (struct event).
const RecordSize = int(unsafe.Sizeof(sigscopeEvent{}))

// Clock converts the kernel's CLOCK_BOOTTIME nanoseconds to wall-clock time.
type Clock struct {
	offset int64 // wall - boottime, ns
}

// Wall returns the wall-clock time of a boot-time timestamp.
func (c Clock) Wall(bootNS uint64) time.Time {
	return time.Unix(0, c.offset+int64(bootNS))
}

// Decode fills e from one raw record and classifies it. It allocates
// nothing: the record is read as the generated type, which bpf2go derived
// from struct event, so no layout is mirrored by hand. A record aligned as
// the ring aligns them (8 bytes) is read where it is, without a copy: at a
// storm's rate of records the copy was a tenth of the JSON path's time.
func Decode(raw []byte, clk Clock, e *Event) error {
	if len(raw) < RecordSize {
		return fmt.Errorf("short record: %d bytes, want %d", len(raw), RecordSize)
	}
	var (
		r   *sigscopeEvent
		tmp sigscopeEvent
	)
	if uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%unsafe.Alignof(tmp) == 0 {
		r = (*sigscopeEvent)(unsafe.Pointer(unsafe.SliceData(raw)))
	} else {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&tmp)), RecordSize), raw)
		r = &tmp
	}

	kind := Kind(r.Type)
	if !kind.Valid() {
		return fmt.Errorf("unknown event type %d", r.Type)
	}
	*e = Event{
		Time:     clk.Wall(r.TsNs),
		BootNS:   r.TsNs,
		Kind:     kind,
		Result:   Result(r.Result),
		Group:    r.Group != 0,
		SiCode:   r.SiCode,
		Code:     sigvocab.CodeOf(r.SiCode),
		Handler:  Disposition(r.Handler),
		Facts:    r.Facts,
		SigFlags: r.SigFlags,
		Target:   decodeProc(&r.Target),
		Raw:      raw[:RecordSize],
	}
	switch kind {
	case KindGenerate, KindExec:
		e.Signal = Signal(r.Signo)
		e.Sender = decodeProc(&r.Sender)
		e.SenderExiting = r.Facts&factSenderExiting != 0
		n := min(int(r.AncestorsLen), MaxAncestors)
		for i := range n {
			e.Ancestors[i] = Ancestor{PID: r.Ancestors[i].Pid, Comm: comm(&r.Ancestors[i].Comm)}
		}
		e.AncestorsCount = n
	case KindDeliver:
		e.Signal = Signal(r.Signo)
	case KindNSEmpty:
		e.Signal = Signal(r.Signo) // the init's exit signal, SIGCHLD
		e.Sender = decodeProc(&r.Sender)
		e.SenderExiting = false // the parent: it is the init that exits
	case KindExit:
		// task->exit_code has the wait(2) status layout.
		if sig := r.ExitCode & 0x7f; sig != 0 {
			e.Signal = Signal(sig)
			e.CoreDumped = r.ExitCode&0x80 != 0
			e.ExitCode = -1
		} else {
			e.ExitCode = int(r.ExitCode>>8) & 0xff
		}
	}
	e.Flags = Classify(e)
	return nil
}

func decodeProc(p *sigscopeProc) Process {
	return Process{
		PID:        p.Pid,
		TID:        p.Tid,
		NsPID:      p.NsPid,
		PidNS:      p.Pidns,
		CgroupID:   p.CgroupId,
		CgroupV1ID: p.CgroupV1Id,
		Comm:       comm(&p.Comm),
	}
}

// comm is c's bytes: an int8 and a byte array of one length share their
// layout, so this is one 16-byte load rather than a loop.
func comm(c *[16]int8) Comm {
	return *(*Comm)(unsafe.Pointer(c))
}
