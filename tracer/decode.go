package tracer

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/sigscope/sigscope/tracer/sigvocab"
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
func Decode(raw []byte, clk Clock, e *sigvocab.Event) error {
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

	kind := sigvocab.Kind(r.Type)
	if !kind.Valid() {
		return fmt.Errorf("unknown event type %d", r.Type)
	}
	*e = sigvocab.Event{
		Time:     clk.Wall(r.TsNs),
		BootNS:   r.TsNs,
		Kind:     kind,
		Result:   sigvocab.Result(r.Result),
		Group:    r.Group != 0,
		SiCode:   r.SiCode,
		Code:     sigvocab.CodeOf(r.SiCode),
		Handler:  sigvocab.Disposition(r.Handler),
		Facts:    r.Facts,
		SigFlags: r.SigFlags,
		Target:   decodeProc(&r.Target),
		Raw:      raw[:RecordSize],
	}
	switch kind {
	case sigvocab.KindGenerate, sigvocab.KindExec:
		e.Signal = sigvocab.Signal(r.Signo)
		e.Sender = decodeProc(&r.Sender)
		e.SenderExiting = r.Facts&sigvocab.FactSenderExiting != 0
		n := min(int(r.AncestorsLen), sigvocab.MaxAncestors)
		for i := range n {
			e.Ancestors[i] = sigvocab.Ancestor{PID: r.Ancestors[i].Pid, Comm: comm(&r.Ancestors[i].Comm)}
		}
		e.AncestorsCount = n
		if r.Facts&(sigvocab.FactNetWatched|sigvocab.FactNetShared) != 0 || kind == sigvocab.KindExec {
			e.NetNS = r.Netns
		}
	case sigvocab.KindDeliver:
		e.Signal = sigvocab.Signal(r.Signo)
	case sigvocab.KindNSEmpty:
		e.Signal = sigvocab.Signal(r.Signo) // the init's exit signal, SIGCHLD
		e.Sender = decodeProc(&r.Sender)
		e.SenderExiting = false // the parent: it is the init that exits
	case sigvocab.KindBlocked:
		// struct event's fields as bpf/sigscope.h's blocked record
		// reuses them.
		e.Task = sigvocab.TaskReading{
			Role:         sigvocab.TaskRole(r.Result),
			Process:      r.Sender.Pid,
			Syscall:      r.SiCode,
			Arg:          r.Sender.CgroupV1Id,
			FdKind:       sigvocab.FdKind(r.Netns),
			CPUNs:        r.Sender.CgroupId,
			OnCPU:        r.Sender.Tid != 0,
			Dispositions: uint8(r.SigFlags),
			Threads:      r.AncestorsLen,
			MoreThreads:  r.Facts&sigvocab.FactMoreThreads != 0,
			MoreChildren: r.Facts&sigvocab.FactMoreChildren != 0,
		}
		if e.Task.Role == sigvocab.RoleExec || e.Task.Role == sigvocab.RoleExecChild {
			// ancestors_len is the exec's slot for these (sigscope.h).
			e.Task.Slot, e.Task.Threads = e.Task.Threads, 0
		}
		e.Handler, e.SigFlags, e.Code, e.SiCode, e.Result, e.Group = 0, 0, 0, 0, 0, false
	case sigvocab.KindExit:
		// task->exit_code has the wait(2) status layout.
		if sig := r.ExitCode & 0x7f; sig != 0 {
			e.Signal = sigvocab.Signal(sig)
			e.CoreDumped = r.ExitCode&0x80 != 0
			e.ExitCode = -1
		} else {
			e.ExitCode = int(r.ExitCode>>8) & 0xff
		}
	}
	e.Flags = sigvocab.Classify(e)
	return nil
}

func decodeProc(p *sigscopeProc) sigvocab.Process {
	return sigvocab.Process{
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
func comm(c *[16]int8) sigvocab.Comm {
	return *(*sigvocab.Comm)(unsafe.Pointer(c))
}
