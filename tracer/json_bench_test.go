package tracer

import (
	"testing"
	"time"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// benchEvents are what a stop looks like on a Kubernetes node: runc's
// SIGTERM to a container's init (a sender with four ancestors), its
// delivery to the init's handler, and the init's exit.
func benchEvents() []sigvocab.Event {
	at := time.Unix(0, 1795400553511313658)
	target := sigvocab.Process{PID: 28619, TID: 28619, NsPID: 1, PidNS: 4026532180, CgroupID: 3084, CgroupV1ID: 9251}
	copy(target.Comm[:], "nginx")
	gen := sigvocab.Event{Time: at, Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGTERM, Result: sigvocab.ResultDelivered, Group: true,
		Code: sigvocab.CodeUser, Handler: sigvocab.DispHandler, Flags: sigvocab.FlagCrossNS | sigvocab.FlagNSInit, Fate: sigvocab.FateHandler, Target: target,
		Sender: sigvocab.Process{PID: 28726, TID: 28726, NsPID: 28726, PidNS: 4026531836, CgroupID: 1, CgroupV1ID: 2819}}
	copy(gen.Sender.Comm[:], "runc")
	for i, a := range []string{"containerd-shim", "containerd", "systemd"} {
		gen.Ancestors[i] = sigvocab.Ancestor{PID: uint32(28599 - 1000*i)}
		copy(gen.Ancestors[i].Comm[:], a)
	}
	gen.Ancestors[3] = sigvocab.Ancestor{PID: 1}
	copy(gen.Ancestors[3].Comm[:], "init")
	gen.AncestorsCount = 4
	del := sigvocab.Event{Time: at.Add(41 * time.Microsecond), Kind: sigvocab.KindDeliver, Signal: sigvocab.SIGTERM, Code: sigvocab.CodeUser,
		Handler: sigvocab.DispHandler, Flags: sigvocab.FlagNSInit, Fate: sigvocab.FateHandler, Target: target}
	exit := sigvocab.Event{Time: at.Add(3 * time.Millisecond), Kind: sigvocab.KindExit, Flags: sigvocab.FlagNSInit, ExitCode: 0, Target: target}
	return []sigvocab.Event{gen, del, exit}
}

// BenchmarkJSONEvent is the event's JSON alone (docs/events.md), into a
// reused buffer: the generate, deliver and exit of one stop in turn.
func BenchmarkJSONEvent(b *testing.B) {
	evs := benchEvents()
	b.ReportAllocs()
	var buf []byte
	for i := 0; b.Loop(); i++ {
		buf = evs[i%len(evs)].AppendJSON(buf[:0])
	}
}

// BenchmarkJSONEventReflect is the same with encoding/json (referenceJSON,
// the encoder before AppendJSON), for the ratio within one run.
func BenchmarkJSONEventReflect(b *testing.B) {
	evs := benchEvents()
	b.ReportAllocs()
	var buf []byte
	for i := 0; b.Loop(); i++ {
		out, err := referenceJSON(&evs[i%len(evs)])
		if err != nil {
			b.Fatal(err)
		}
		buf = append(buf[:0], out...)
	}
}

// BenchmarkJSONEventEncoder is BenchmarkJSONEvent through a stream's
// Encoder (`trace -o json`): the same three events, their parts cached.
func BenchmarkJSONEventEncoder(b *testing.B) {
	evs := benchEvents()
	var enc sigvocab.Encoder
	b.ReportAllocs()
	var buf []byte
	for i := 0; b.Loop(); i++ {
		buf = enc.AppendEvent(buf[:0], &evs[i%len(evs)])
	}
}
