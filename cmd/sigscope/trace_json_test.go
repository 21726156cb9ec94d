package main

import (
	"bufio"
	"io"
	"testing"
	"time"

	"github.com/sigscope/sigscope/container"
	"github.com/sigscope/sigscope/tracer"
)

// stopEvents are one stop of a Kubernetes container as trace sees it, with
// the containers the pipeline resolves: runc's SIGTERM to the container's
// init (a sender with four ancestors, on the host), its delivery to the
// init's handler, and the init's exit.
func stopEvents() (evs []tracer.Event, targets, senders []*container.Info) {
	c := &container.Info{ID: "4eaed9df4c1da03033fb1dae0ca4834b50367ee078507c361ad1e6172ae0d50c", Runtime: "containerd",
		Name: "web", Image: "registry.example.com/team/web:1.24.3", Pod: "web-7d4b9c6f8-xk2pq", Namespace: "default",
		MainPID: 28619, GracePeriod: 30, StopSignal: tracer.SIGTERM}
	at := time.Unix(0, 1795400553511313658)
	target := tracer.Process{PID: 28619, TID: 28619, NsPID: 1, PidNS: 4026532180, CgroupID: 3084, CgroupV1ID: 9251}
	copy(target.Comm[:], "nginx")
	gen := tracer.Event{Time: at, Kind: tracer.KindGenerate, Signal: tracer.SIGTERM, Result: tracer.ResultDelivered,
		Group: true, Code: tracer.CodeUser, Handler: tracer.DispHandler, Flags: tracer.FlagCrossNS | tracer.FlagNSInit,
		Fate: tracer.FateHandler, Target: target,
		Sender: tracer.Process{PID: 28726, TID: 28726, NsPID: 28726, PidNS: 4026531836, CgroupID: 1, CgroupV1ID: 2819}}
	copy(gen.Sender.Comm[:], "runc")
	for i, a := range []string{"containerd-shim", "containerd", "systemd", "init"} {
		gen.Ancestors[i] = tracer.Ancestor{PID: uint32(28599 - 1000*i)}
		copy(gen.Ancestors[i].Comm[:], a)
	}
	gen.AncestorsCount = 4
	del := tracer.Event{Time: at.Add(41 * time.Microsecond), Kind: tracer.KindDeliver, Signal: tracer.SIGTERM,
		Code: tracer.CodeUser, Handler: tracer.DispHandler, Flags: tracer.FlagNSInit, Fate: tracer.FateHandler, Target: target}
	exit := tracer.Event{Time: at.Add(3 * time.Millisecond), Kind: tracer.KindExit, Flags: tracer.FlagNSInit, Target: target}
	return []tracer.Event{gen, del, exit}, []*container.Info{c, c, c}, []*container.Info{nil, nil, nil}
}

// BenchmarkJSONTraceEvent is trace -o json's per-event work after decoding
// and container resolution: the filter, the line, the buffered write.
func BenchmarkJSONTraceEvent(b *testing.B) {
	evs, targets, senders := stopEvents()
	s := &traceSink{w: bufio.NewWriterSize(io.Discard, 64<<10), json: true}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		j := i % len(evs)
		if err := s.event(&evs[j], targets[j], senders[j]); err != nil {
			b.Fatal(err)
		}
	}
}
