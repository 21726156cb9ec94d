package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/pipeline"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// stopEvents are one stop of a Kubernetes container as trace sees it, with
// the containers the pipeline resolves: runc's SIGTERM to the container's
// init (a sender with four ancestors, on the host), its delivery to the
// init's handler, and the init's exit.
func stopEvents() (evs []sigvocab.Event, targets, senders []*identity.Info) {
	c := &identity.Info{Identity: identity.Identity{ID: "4eaed9df4c1da03033fb1dae0ca4834b50367ee078507c361ad1e6172ae0d50c", Runtime: "containerd", Name: "web", Image: "registry.example.com/team/web:1.24.3", Pod: "web-7d4b9c6f8-xk2pq", Namespace: "default"}, MainPID: 28619, GracePeriod: 30, StopSignal: sigvocab.SIGTERM}
	at := time.Unix(0, 1795400553511313658)
	target := sigvocab.Process{PID: 28619, TID: 28619, NsPID: 1, PidNS: 4026532180, CgroupID: 3084, CgroupV1ID: 9251}
	copy(target.Comm[:], "nginx")
	gen := sigvocab.Event{Time: at, Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGTERM, Result: sigvocab.ResultDelivered,
		Group: true, Code: sigvocab.CodeUser, Handler: sigvocab.DispHandler, Flags: sigvocab.FlagCrossNS | sigvocab.FlagNSInit,
		Fate: sigvocab.FateHandler, Target: target,
		Sender: sigvocab.Process{PID: 28726, TID: 28726, NsPID: 28726, PidNS: 4026531836, CgroupID: 1, CgroupV1ID: 2819}}
	copy(gen.Sender.Comm[:], "runc")
	for i, a := range []string{"containerd-shim", "containerd", "systemd", "init"} {
		gen.Ancestors[i] = sigvocab.Ancestor{PID: uint32(28599 - 1000*i)}
		copy(gen.Ancestors[i].Comm[:], a)
	}
	gen.AncestorsCount = 4
	del := sigvocab.Event{Time: at.Add(41 * time.Microsecond), Kind: sigvocab.KindDeliver, Signal: sigvocab.SIGTERM,
		Code: sigvocab.CodeUser, Handler: sigvocab.DispHandler, Flags: sigvocab.FlagNSInit, Fate: sigvocab.FateHandler, Target: target}
	exit := sigvocab.Event{Time: at.Add(3 * time.Millisecond), Kind: sigvocab.KindExit, Flags: sigvocab.FlagNSInit, Target: target}
	return []sigvocab.Event{gen, del, exit}, []*identity.Info{c, c, c}, []*identity.Info{nil, nil, nil}
}

// stormEvents are a full-speed signal storm on the host, as the bench
// makes it: a shell's process signalling itself, no container.
func stormEvents() (evs []sigvocab.Event, targets, senders []*identity.Info) {
	p := sigvocab.Process{PID: 15021, TID: 15021, NsPID: 15021, PidNS: 4026531836, CgroupID: 1, CgroupV1ID: 10083}
	copy(p.Comm[:], "storm")
	e := sigvocab.Event{Time: time.Unix(0, 1795400553511313658), Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGUSR1,
		Result: sigvocab.ResultDelivered, Group: true, Code: sigvocab.CodeUser, Handler: sigvocab.DispHandler,
		Fate: sigvocab.FateHandler, Target: p, Sender: p}
	for i, a := range []string{"bash", "sshd", "systemd"} {
		e.Ancestors[i] = sigvocab.Ancestor{PID: uint32(15020 - 7000*i)}
		copy(e.Ancestors[i].Comm[:], a)
	}
	e.AncestorsCount = 3
	return []sigvocab.Event{e}, []*identity.Info{nil}, []*identity.Info{nil}
}

// trace -o json writes each event as a line that reads back as itself,
// with its container, and allocates nothing doing so.
func TestTraceSinkJSON(t *testing.T) {
	evs, targets, senders := stopEvents()
	storm, _, _ := stormEvents()
	evs, targets, senders = append(evs, storm...), append(targets, nil), append(senders, nil)
	var out bytes.Buffer
	s := &traceSink{w: bufio.NewWriter(&out), json: true}
	for i := range evs {
		if err := s.event(&evs[i], targets[i], senders[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.w.Flush(); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := pipeline.ReadRecording(bytes.NewReader(out.Bytes()), func(e *sigvocab.Event, target, _ *identity.Info) error {
		want := &evs[n]
		if e.Kind != want.Kind || e.Signal != want.Signal || e.Flags != want.Flags || e.Target != want.Target ||
			e.Sender != want.Sender || e.Ancestors != want.Ancestors || !e.Time.Equal(want.Time) {
			t.Errorf("line %d reads back as %+v, want %+v", n+1, *e, *want)
		}
		if (target == nil) != (targets[n] == nil) || target != nil && !reflect.DeepEqual(target.Summary(), targets[n].Summary()) {
			t.Errorf("line %d: container %+v, want %+v", n+1, target, targets[n])
		}
		n++
		return nil
	})
	if err != nil || n != len(evs) {
		t.Fatalf("read %d of %d lines: %v\n%s", n, len(evs), err, out.Bytes())
	}
	for _, l := range bytes.SplitAfter(out.Bytes(), []byte("\n"))[:n] {
		if !json.Valid(l) {
			t.Errorf("invalid JSON: %s", l)
		}
	}

	s = &traceSink{w: bufio.NewWriterSize(io.Discard, 64<<10), json: true}
	for i := range evs {
		if a := testing.AllocsPerRun(100, func() { _ = s.event(&evs[i], targets[i], senders[i]) }); a != 0 {
			t.Errorf("%s event: %v allocations", evs[i].Kind, a)
		}
	}
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

// BenchmarkJSONTraceEventHost is the same for the bench's storm: a host
// process signalling itself, no container.
func BenchmarkJSONTraceEventHost(b *testing.B) {
	evs, targets, senders := stormEvents()
	s := &traceSink{w: bufio.NewWriterSize(io.Discard, 64<<10), json: true}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.event(&evs[0], targets[0], senders[0]); err != nil {
			b.Fatal(err)
		}
	}
}
