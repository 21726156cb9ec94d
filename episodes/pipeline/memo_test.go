package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sigscope/sigscope/containers/container"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The memo answers what the resolver answers, holds an answer for one clock
// reading only, and keys nothing for a process that carries no key.
func TestLookupMemo(t *testing.T) {
	proc := t.TempDir()
	host := func(pid uint32, v1 uint64) sigvocab.Process {
		d := filepath.Join(proc, fmt.Sprint(pid))
		if err := os.MkdirAll(filepath.Join(d, "ns"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("pid:[4026531836]", filepath.Join(d, "ns", "pid")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup"), []byte("0::/\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return sigvocab.Process{PID: pid, TID: pid, PidNS: 4026531836, CgroupID: 1, CgroupV1ID: v1}
	}
	r := container.NewResolver(container.Options{ProcRoot: proc, CgroupRoot: t.TempDir(), NoRuntimeAPI: true,
		NoCgroupWatch: true, CRISockets: []string{}})
	defer r.Close()
	p := NewReplay(Options{Resolver: r, Senders: true})
	procs := []sigvocab.Process{host(10, 7), host(11, 7), host(12, 8), {PID: 13}}
	for i := range 3 * clockReuse {
		e := &sigvocab.Event{Kind: sigvocab.KindGenerate, BootNS: uint64(i), Sender: procs[i%4], Target: procs[(i+1)%4]}
		if err := p.Handle(e); err != nil {
			t.Fatal(err)
		}
		now := p.clock.now
		for _, pr := range []*sigvocab.Process{&e.Sender, &e.Target} {
			if got, want := p.lookup(r, pr, now), r.LookupAt(pr, now); got != want {
				t.Fatalf("event %d, pid %d: memo %v, resolver %v", i, pr.PID, got, want)
			}
		}
	}
	for _, m := range p.memo {
		if m.gen != 0 && m.gen != p.clock.gen {
			continue // an older reading's: not used again
		}
		if m.gen != 0 && m.key == (container.Key{}) {
			t.Errorf("the memo holds an answer for a process with no key")
		}
	}
	if p.clock.gen < 3 {
		t.Errorf("%d clock readings over %d events, want at least 3", p.clock.gen, 3*clockReuse)
	}
}
