package tracer

import (
	"unsafe"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// EncodeRecord returns the raw record the kernel would write for e (the
// inverse of Decode with a zero Clock: its time stamp is e.Time's Unix
// nanoseconds), so that a recording can be replayed through Decode
// without root: the JSON path's benchmark (episodes/pipeline) feeds it
// recorded events. Facts, SigFlags and the exit status come from e's
// fields; Flags and Fate are Decode's to derive again.
func EncodeRecord(e *sigvocab.Event) []byte {
	r := sigscopeEvent{
		TsNs:     uint64(e.Time.UnixNano()),
		Type:     uint8(e.Kind),
		Result:   uint8(e.Result),
		Handler:  uint8(e.Handler),
		Signo:    int32(e.Signal),
		SiCode:   e.SiCode,
		Facts:    e.Facts,
		SigFlags: e.SigFlags,
		Sender:   encodeProc(&e.Sender),
		Target:   encodeProc(&e.Target),
	}
	if e.Group {
		r.Group = 1
	}
	if e.SenderExiting {
		r.Facts |= sigvocab.FactSenderExiting
	}
	if e.Kind == sigvocab.KindExit {
		if e.Signal != 0 {
			r.ExitCode = int32(e.Signal) & 0x7f
			if e.CoreDumped {
				r.ExitCode |= 0x80
			}
		} else {
			r.ExitCode = int32(e.ExitCode&0xff) << 8
		}
	}
	n := min(e.AncestorsCount, sigvocab.MaxAncestors)
	r.AncestorsLen = uint8(n)
	for i := range n {
		r.Ancestors[i].Pid = e.Ancestors[i].PID
		r.Ancestors[i].Comm = encodeComm(&e.Ancestors[i].Comm)
	}
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&r)), RecordSize)...)
}

func encodeProc(p *sigvocab.Process) sigscopeProc {
	return sigscopeProc{Pid: p.PID, Tid: p.TID, NsPid: p.NsPID, Pidns: p.PidNS,
		CgroupId: p.CgroupID, CgroupV1Id: p.CgroupV1ID, Comm: encodeComm(&p.Comm)}
}

func encodeComm(c *sigvocab.Comm) (out [16]int8) {
	for i, b := range c {
		out[i] = int8(b)
	}
	return out
}
