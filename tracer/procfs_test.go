package tracer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// The older mark_victim passes a thread id only; the tracer completes the
// process identity from /proc.
func TestCompleteOOMVictim(t *testing.T) {
	procRoot := t.TempDir()
	dir := filepath.Join(procRoot, "4243")
	if err := os.MkdirAll(filepath.Join(dir, "ns"), 0o755); err != nil {
		t.Fatal(err)
	}
	status := "Name:\tworker\nUmask:\t0022\nTgid:\t4242\nNgid:\t0\nPid:\t4243\nNStgid:\t4242\t7\nNSpid:\t4243\t8\n"
	if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	// Any file gives an inode; the real one is the namespace's.
	if err := os.WriteFile(filepath.Join(dir, "ns", "pid"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e := sigvocab.Event{Kind: sigvocab.KindOOM, Target: sigvocab.Process{PID: 4243, TID: 4243}}
	completeOOMVictim(&e, procRoot)
	if e.Target.PID != 4242 || e.Target.TID != 4243 || e.Target.NsPID != 7 || e.Target.PidNS == 0 || e.Target.Comm.String() != "worker" {
		t.Errorf("completed victim %+v (comm %q)", e.Target, e.Target.Comm)
	}
	// A victim with full identity (newer kernels) is left alone.
	e = sigvocab.Event{Kind: sigvocab.KindOOM, Target: sigvocab.Process{PID: 1, TID: 4243, PidNS: 99}}
	completeOOMVictim(&e, procRoot)
	if e.Target.PID != 1 {
		t.Errorf("complete victim was rewritten: %+v", e.Target)
	}
}

// The OOM killer's SIGKILL to the victim comes just before the record that
// names it by thread id: its identity completes the record, without /proc.
func TestCompleteOOMFromKill(t *testing.T) {
	procRoot := t.TempDir() // empty: /proc has nothing left
	kill := sigvocab.Process{PID: 4242, TID: 4243, NsPID: 1, PidNS: 4026532177, CgroupV1ID: 77, Comm: sigvocab.Comm{'h', 'o', 'g'}}
	e := sigvocab.Event{Kind: sigvocab.KindOOM, Target: sigvocab.Process{PID: 4243, TID: 4243}}
	completeOOMFrom(&e, &kill, procRoot)
	if e.Target != kill || !e.Flags.Has(sigvocab.FlagNSInit) {
		t.Errorf("victim %+v flags %s", e.Target, e.Flags)
	}
	other := sigvocab.Process{PID: 9, TID: 9, PidNS: 1}
	e = sigvocab.Event{Kind: sigvocab.KindOOM, Target: sigvocab.Process{PID: 4243, TID: 4243}}
	completeOOMFrom(&e, &other, procRoot)
	if e.Target.PidNS != 0 {
		t.Errorf("completed from another thread's kill: %+v", e.Target)
	}
}
