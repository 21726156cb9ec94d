package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sigscope/sigscope/containers/container"
	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/pipeline"
	"github.com/sigscope/sigscope/tracer"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The JSON path end to end, per event, as `trace -o json` runs it (issue
// 24: its reader must keep up with the fastest sender): Decode of a raw
// record, the pipeline's container lookups (a real Resolver, over a fake
// /proc whose processes are the host's), the trace sink's line and its
// buffered write to io.Discard. What it leaves out is the ring itself:
// reading records whose cache lines another CPU just wrote, which only
// `make bench` measures.
//
//	go test -run '^$' -bench TraceJSONPath -count 6 ./cmd/sigscope/

// benchStorm is `make bench`'s storm as trace sees it: the bench's sender
// (a host process with its ancestors) sending SIGUSR1 to a host sleep that
// ignores it, a record every 420 ns (the traced sender's kill on a fast host).
func benchStorm() []sigvocab.Event {
	sender := sigvocab.Process{PID: 48213, TID: 48213, NsPID: 48213, PidNS: 4026531836, CgroupID: 1, CgroupV1ID: 10083}
	copy(sender.Comm[:], "bench")
	target := sigvocab.Process{PID: 48190, TID: 48190, NsPID: 48190, PidNS: 4026531836, CgroupID: 1, CgroupV1ID: 10083}
	copy(target.Comm[:], "sleep")
	e := sigvocab.Event{Kind: sigvocab.KindGenerate, Signal: sigvocab.SIGUSR1, Result: sigvocab.ResultIgnored, Group: true,
		Code: sigvocab.CodeUser, Handler: sigvocab.DispIgnore, Sender: sender, Target: target}
	for i, a := range []string{"go", "make", "sudo", "bash"} {
		e.Ancestors[i] = sigvocab.Ancestor{PID: uint32(48100 - 31*i)}
		copy(e.Ancestors[i].Comm[:], a)
	}
	e.AncestorsCount = 4
	at := time.Date(2026, 11, 26, 9, 59, 59, 999_000_000, time.UTC)
	evs := make([]sigvocab.Event, 4096)
	for i := range evs {
		evs[i] = e
		evs[i].Time = at.Add(time.Duration(i) * 420 * time.Nanosecond)
	}
	return evs
}

// recordedStops are the events of every recorded stop
// (episodes/timeline/testdata/streams), with the containers the recordings name.
func recordedStops(b *testing.B) (evs []sigvocab.Event, targets, senders []*identity.Info) {
	paths, err := filepath.Glob(filepath.Join("..", "..", "episodes", "timeline", "testdata", "streams", "*.jsonl"))
	if err != nil || len(paths) == 0 {
		b.Fatalf("no recorded streams: %v", err)
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		err = pipeline.ReadRecording(f, func(e *sigvocab.Event, target, sender *identity.Info) error {
			evs, targets, senders = append(evs, *e), append(targets, target), append(senders, sender)
			return nil
		})
		f.Close()
		if err != nil {
			b.Fatalf("%s: %v", p, err)
		}
	}
	return evs, targets, senders
}

// fakeHostProc is a /proc in which every process of evs is alive on the
// host: the resolver's answer for each is "no container", as for the storm.
func fakeHostProc(b *testing.B, evs []sigvocab.Event) string {
	dir := b.TempDir()
	add := func(p *sigvocab.Process) {
		d := filepath.Join(dir, fmt.Sprint(p.PID))
		if _, err := os.Stat(d); err == nil || p.PID == 0 {
			return
		}
		if err := os.MkdirAll(filepath.Join(d, "ns"), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.Symlink(fmt.Sprintf("pid:[%d]", p.PidNS), filepath.Join(d, "ns", "pid")); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup"), []byte("0::/\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for i := range evs {
		add(&evs[i].Target)
		add(&evs[i].Sender)
	}
	return dir
}

func BenchmarkTraceJSONPath(b *testing.B) {
	storm := benchStorm()
	recorded, rTargets, rSenders := recordedStops(b)
	for _, c := range []struct {
		name string
		evs  []sigvocab.Event
		// containers, when set, replaces the resolver's answers (host
		// processes in the fake /proc) by the recording's, so that the
		// container objects are written as trace writes them.
		targets, senders []*identity.Info
	}{
		{"storm", storm, nil, nil},
		{"recorded", recorded, rTargets, rSenders},
	} {
		b.Run(c.name, func(b *testing.B) {
			raws := make([][]byte, len(c.evs))
			for i := range c.evs {
				raws[i] = tracer.EncodeRecord(&c.evs[i])
			}
			r := container.NewResolver(container.Options{ProcRoot: fakeHostProc(b, c.evs), CgroupRoot: b.TempDir(),
				NoRuntimeAPI: true, NoCgroupWatch: true, CRISockets: []string{}})
			defer r.Close()
			sink := &traceSink{w: bufio.NewWriterSize(io.Discard, 64<<10), json: true}
			var j int
			onEvent := sink.event
			if c.targets != nil {
				onEvent = func(e *sigvocab.Event, _, _ *identity.Info) error {
					return sink.event(e, c.targets[j], c.senders[j])
				}
			}
			p := pipeline.NewReplay(pipeline.Options{Resolver: r, Senders: true, OnEvent: onEvent})
			var ev sigvocab.Event
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				j = i % len(raws)
				if err := tracer.Decode(raws[j], tracer.Clock{}, &ev); err != nil {
					b.Fatal(err)
				}
				if err := p.Handle(&ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
