package timeline

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/tracer"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The test streams are built from records the privileged tracer tests
// captured from the kernel (tracer/testdata/events): each event starts as a
// real record, decoded by tracer.Decode, and only its identities and time are
// changed. Where a shape was not captured (a blocked SIGTERM, a dash-style
// drop on dequeue, an OOM-killer SIGKILL), the raw facts are changed and
// sigvocab.Classify derives the flags, as it does for live events.
// The oom event is built by hand (see sim.oom).

// Raw facts (enum fact in bpf/sigscope.h) that some shapes need changed.
const (
	factInfoPriv         = 1 << 1
	factSenderInTargetNS = 1 << 5
	factTargetNSInit     = 1 << 6
	factBlocked          = 1 << 7
	factTargetGone       = 1 << 11
)

// newEngine is New for tests whose streams are whole: tracing began long
// before their events (the recorded ones are on the boot clock, in 1970),
// unless the test says when.
func newEngine(opts Options) *Engine {
	if opts.Since.IsZero() {
		opts.Since = longAgo
	}
	return New(opts)
}

var longAgo = time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)

var recordCache = map[string]sigvocab.Event{}

func record(t *testing.T, name string) sigvocab.Event {
	t.Helper()
	if ev, ok := recordCache[name]; ok {
		return ev
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "tracer", "testdata", "events", name+".hex"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	var ev sigvocab.Event
	if err := tracer.Decode(raw, tracer.Clock{}, &ev); err != nil {
		t.Fatal(err)
	}
	ev.Raw = nil
	recordCache[name] = ev
	return ev
}

func comm(s string) sigvocab.Comm {
	var c sigvocab.Comm
	copy(c[:15], s)
	return c
}

func ancestors(names ...string) ([sigvocab.MaxAncestors]sigvocab.Ancestor, int) {
	var a [sigvocab.MaxAncestors]sigvocab.Ancestor
	for i, n := range names {
		a[i] = sigvocab.Ancestor{PID: uint32(4000 - 100*i), Comm: comm(n)}
	}
	return a, len(names)
}

// A host-side sender: runc as containerd's shim runs it for docker stop.
var (
	runc    = sigvocab.Process{PID: 4242, TID: 4242, NsPID: 4242, PidNS: sigvocab.HostPidNS, CgroupID: 1, Comm: comm("runc")}
	kubectl = sigvocab.Process{PID: 4343, TID: 4343, NsPID: 4343, PidNS: sigvocab.HostPidNS, CgroupID: 1, Comm: comm("kill")}
)

type input struct {
	ev sigvocab.Event
	c  *identity.Info
}

// sim builds the events of one pid namespace: a container with its PID 1.
type sim struct {
	t     *testing.T
	base  time.Time
	pidns uint32
	init  sigvocab.Process
	info  *identity.Info
	in    []input
}

var base = time.Date(2026, 11, 21, 20, 16, 59, 95361713, time.UTC)

func newSim(t *testing.T, pidns, initPID uint32, initComm string, info *identity.Info) *sim {
	return &sim{t: t, base: base, pidns: pidns, info: info,
		init: sigvocab.Process{PID: initPID, TID: initPID, NsPID: 1, PidNS: pidns, CgroupID: 1, CgroupV1ID: 2595, Comm: comm(initComm)}}
}

func (s *sim) kid(pid, nsPID uint32, name string) sigvocab.Process {
	return sigvocab.Process{PID: pid, TID: pid, NsPID: nsPID, PidNS: s.pidns, CgroupID: 1, CgroupV1ID: 2595, Comm: comm(name)}
}

func (s *sim) push(at time.Duration, ev sigvocab.Event) *sim {
	ev.Time = s.base.Add(at)
	ev.BootNS = uint64(at)
	s.in = append(s.in, input{ev: ev, c: s.info})
	return s
}

func fromHost(ev *sigvocab.Event, p sigvocab.Process, anc ...string) {
	ev.Sender = p
	ev.Ancestors, ev.AncestorsCount = ancestors(anc...)
}

// stop sends sig from runc to PID 1, with PID 1's disposition and mask as
// given: the kernel's verdict follows from them as it would live.
func (s *sim) stop(at time.Duration, sig sigvocab.Signal, disp sigvocab.Disposition, blocked bool) *sim {
	var ev sigvocab.Event
	switch {
	case blocked:
		ev = record(s.t, "TestPID1HandlerDelivery__generate")
		ev.Facts |= factBlocked
	case disp == sigvocab.DispHandler:
		ev = record(s.t, "TestPID1HandlerDelivery__generate")
	default: // no handler, or SIG_IGN: dropped at generation
		ev = record(s.t, "TestPID1IgnoresSIGTERM__host")
	}
	ev.Signal, ev.Handler, ev.Target = sig, disp, s.init
	fromHost(&ev, runc, "containerd-shim", "systemd")
	ev.Flags = sigvocab.Classify(&ev)
	return s.push(at, ev)
}

// deliver is PID 1 dequeuing sig with disposition disp.
func (s *sim) deliver(at time.Duration, sig sigvocab.Signal, disp sigvocab.Disposition) *sim {
	ev := record(s.t, "TestPID1HandlerDelivery__deliver")
	ev.Signal, ev.Handler, ev.Target = sig, disp, s.init
	ev.Flags = sigvocab.Classify(&ev)
	return s.push(at, ev)
}

// kill is a SIGKILL to PID 1 from sender on the host.
func (s *sim) kill(at time.Duration, sender sigvocab.Process) *sim {
	ev := record(s.t, "TestHostSIGKILLToInit__kill")
	ev.Target = s.init
	fromHost(&ev, sender, "containerd-shim", "systemd")
	return s.push(at, ev)
}

// oomKernelKill is the OOM killer's SIGKILL to victim, raised in the
// allocating task inside the container.
func (s *sim) oomKernelKill(at time.Duration, allocator, victim sigvocab.Process) *sim {
	ev := record(s.t, "TestHostSIGKILLToInit__kill")
	ev.Target, ev.Sender, ev.AncestorsCount = victim, allocator, 0
	ev.Code, ev.SiCode = sigvocab.CodeKernel, 128
	ev.Facts |= factInfoPriv | factSenderInTargetNS
	if victim.NsPID != 1 {
		ev.Facts &^= factTargetNSInit
	}
	ev.Flags = sigvocab.Classify(&ev)
	return s.push(at, ev)
}

// oom is the oom:mark_victim event; no record of it was captured yet, so it
// is built as docs/events.md describes it: the victim as target, nothing else.
func (s *sim) oom(at time.Duration, victim sigvocab.Process) *sim {
	ev := sigvocab.Event{Kind: sigvocab.KindOOM, Target: victim}
	if victim.NsPID == 1 {
		ev.Flags = sigvocab.FlagNSInit
	}
	return s.push(at, ev)
}

// initExit ends PID 1 by sig, or with code when sig is 0.
func (s *sim) initExit(at time.Duration, sig sigvocab.Signal, code int) *sim {
	var ev sigvocab.Event
	if sig != 0 {
		ev = record(s.t, "TestHostSIGKILLToInit__exit")
		ev.Signal = sig
	} else {
		ev = record(s.t, "TestNamespaceCascade__init-exit")
		ev.ExitCode = code
	}
	ev.Target = s.init
	return s.push(at, ev)
}

// cascade is the exiting PID 1's SIGKILL to kid.
func (s *sim) cascade(at time.Duration, kid sigvocab.Process) *sim {
	ev := record(s.t, "TestNamespaceCascade__cascade-3")
	ev.Sender, ev.Target = s.init, kid
	ev.Ancestors, ev.AncestorsCount = ancestors("containerd-shim", "systemd")
	return s.push(at, ev)
}

// kidExit ends kid by sig, or with code when sig is 0.
func (s *sim) kidExit(at time.Duration, kid sigvocab.Process, sig sigvocab.Signal, code int) *sim {
	ev := record(s.t, "TestNamespaceCascade__child-exit")
	ev.Target, ev.Signal, ev.ExitCode = kid, sig, -1
	if sig == 0 {
		ev.ExitCode = code
	}
	return s.push(at, ev)
}

// nsEmpty is the dying PID 1 notifying its parent (the shim) once its
// namespace is empty: the end of the cascade.
func (s *sim) nsEmpty(at time.Duration) *sim {
	ev := record(s.t, "TestNamespaceCascade__ns-empty")
	ev.Target = s.init
	ev.Sender = sigvocab.Process{PID: 4100, TID: 4100, NsPID: 4100, PidNS: sigvocab.HostPidNS, CgroupID: 1, Comm: comm("containerd-shim")}
	return s.push(at, ev)
}

// forward is PID 1 sending sig to kid (an init forwarding the stop signal),
// kid having disposition disp.
func (s *sim) forward(at time.Duration, sig sigvocab.Signal, kid sigvocab.Process, disp sigvocab.Disposition) *sim {
	ev := record(s.t, "TestPID1IgnoresSIGTERM__inside")
	ev.Signal, ev.Sender, ev.Target, ev.Handler = sig, s.init, kid, disp
	ev.Result, ev.SigFlags = sigvocab.ResultDelivered, 0
	ev.Facts &^= factTargetNSInit
	ev.Ancestors, ev.AncestorsCount = ancestors("containerd-shim", "systemd")
	ev.Flags = sigvocab.Classify(&ev)
	return s.push(at, ev)
}

// kidDeliver is kid dequeuing sig into its handler.
func (s *sim) kidDeliver(at time.Duration, sig sigvocab.Signal, kid sigvocab.Process) *sim {
	ev := record(s.t, "TestPID1HandlerDelivery__deliver")
	ev.Signal, ev.Target, ev.SigFlags = sig, kid, 0
	ev.Facts &^= factTargetNSInit
	ev.Flags = sigvocab.Classify(&ev)
	return s.push(at, ev)
}

// feed gives every input to e and returns the episodes completed along the
// way, then those Flush completes.
func feed(e *Engine, in []input) (done, flushed []Episode) {
	for i := range in {
		done = append(done, e.Add(&in[i].ev, in[i].c)...)
	}
	return done, e.Flush()
}

// merge interleaves streams by time, as the ring buffer would.
func merge(streams ...[]input) []input {
	var out []input
	for _, s := range streams {
		out = append(out, s...)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].ev.Time.Before(out[j-1].ev.Time); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func dockerInfo(id, name string, stopTimeout int) *identity.Info {
	return &identity.Info{Identity: identity.Identity{ID: id, Runtime: "docker", Name: name, Image: "sigscope/" + name + ":test"}, StopTimeout: stopTimeout}
}
