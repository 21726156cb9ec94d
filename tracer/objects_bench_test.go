package tracer

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// BenchmarkGenerateObjects measures what the compat object (kernels without
// bpf_get_current_task_btf, before 5.11) costs against the fast one on the
// same kernel: b.N SIGUSR1 from a child process to one that ignores it,
// every one recorded. ns/op is the sender's whole kill(2); ns/generate is
// handle_generate's own run time per invocation, from the kernel's counters
// (BPF_ENABLE_STATS). Where the kernel lacks the helper both load the compat
// object. Under qemu's software emulation the times are not comparable to
// a real CPU's; their ratio is what to read.
//
//	flock /tmp/sigscope-priv.lock go test -run '^$' -bench GenerateObjects ./tracer/
func BenchmarkGenerateObjects(b *testing.B) {
	testutil.RequirePrivileged(b)
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatalf("BPF_ENABLE_STATS: %v", err)
	}
	defer stats.Close()
	pid := ignoringTarget(b)
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"fast", Options{Signals: sigvocab.NewSignalSet(sigvocab.SIGUSR1), PID: uint32(pid)}},
		{"compat", WithCompatObject(Options{Signals: sigvocab.NewSignalSet(sigvocab.SIGUSR1), PID: uint32(pid)})},
	} {
		b.Run(c.name, func(b *testing.B) {
			tr, err := New(c.opts)
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- tr.Run(ctx, func(*sigvocab.Event) error { return nil }) }()
			defer func() { cancel(); <-done }()

			storm := exec.Command(os.Args[0])
			storm.Env = append(os.Environ(), "SIGSCOPE_TEST_HELPER=storm",
				"STORM_PID="+strconv.Itoa(pid), "STORM_N="+strconv.Itoa(b.N), "STORM_SIG=10")
			b.ResetTimer()
			if out, err := storm.CombinedOutput(); err != nil {
				b.Fatalf("storm: %v\n%s", err, out)
			}
			b.StopTimer()
			ps, err := tr.progs[0].Stats() // handle_generate, attached first
			if err != nil {
				b.Fatal(err)
			}
			if ps.RunCount > 0 {
				b.ReportMetric(float64(ps.Runtime.Nanoseconds())/float64(ps.RunCount), "ns/generate")
			}
		})
	}
}
