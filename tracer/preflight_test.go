package tracer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/sigscope/sigscope/test/testutil"
)

func TestNoBTFIsNamed(t *testing.T) {
	old := btfPath
	btfPath = "/nonexistent/vmlinux"
	defer func() { btfPath = old }()
	err := preflight()
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "no BTF") || !strings.Contains(err.Error(), "CONFIG_DEBUG_INFO_BTF") {
		t.Fatalf("preflight without BTF: %v", err)
	}
}

func TestLockdownConfidentialityIsNamed(t *testing.T) {
	old := lockdownPath
	defer func() { lockdownPath = old }()
	lockdownPath = filepath.Join(t.TempDir(), "lockdown")
	for content, want := range map[string]string{
		"none integrity [confidentiality]\n": "confidentiality",
		"none [integrity] confidentiality\n": "integrity",
		"[none] integrity confidentiality\n": "none",
	} {
		if err := os.WriteFile(lockdownPath, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := lockdownMode(); err != nil || got != want {
			t.Errorf("lockdownMode(%q) = %q, %v; want %q", content, got, err, want)
		}
	}
	if os.Geteuid() != 0 {
		return // preflight stops at the capability check first
	}
	_ = os.WriteFile(lockdownPath, []byte("none integrity [confidentiality]\n"), 0o644)
	err := preflight()
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "lockdown") {
		t.Errorf("preflight under confidentiality lockdown: %v", err)
	}
}

func TestExitPrototypeFromBTF(t *testing.T) {
	ptr := func(n int) *btf.Typedef {
		params := make([]btf.FuncParam, n)
		return &btf.Typedef{Name: "btf_trace_sched_process_exit", Type: &btf.Pointer{Target: &btf.FuncProto{Params: params}}}
	}
	choose := func(td *btf.Typedef) (bool, error) {
		n, err := protoParams(td)
		if err != nil {
			return false, err
		}
		return groupDeadFromParams(n)
	}
	if v, err := choose(ptr(2)); err != nil || v {
		t.Errorf("2 params (before 6.16): %v %v, want the 1-argument program", v, err)
	}
	if v, err := choose(ptr(3)); err != nil || !v {
		t.Errorf("3 params (6.16+): %v %v, want the 2-argument program", v, err)
	}
	if _, err := choose(ptr(4)); err == nil {
		t.Error("4 params accepted")
	}
	if _, err := choose(&btf.Typedef{Type: &btf.Int{}}); err == nil {
		t.Error("non-pointer accepted")
	}
}

// On the running kernel the choice must match what its BTF says, and the
// chosen program must be the one attached.
func TestExitProgramMatchesKernel(t *testing.T) {
	testutil.RequirePrivileged(t)
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatal(err)
	}
	twoArg, err := exitHasGroupDead(spec)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	want := "handle_exit_v1"
	if twoArg {
		want = "handle_exit_v2"
	}
	t.Logf("kernel sched_process_exit has group_dead: %v; attached %s", twoArg, tr.ExitProgram())
	if tr.ExitProgram() != want {
		t.Errorf("attached %s, want %s", tr.ExitProgram(), want)
	}
	oomTask, err := oomPassesTask(spec)
	if err != nil {
		t.Fatal(err)
	}
	wantOOM := map[bool]string{false: "handle_oom_v1", true: "handle_oom_v2"}[oomTask]
	t.Logf("kernel mark_victim passes the task: %v; attached %s", oomTask, tr.OOMProgram())
	if tr.OOMProgram() != wantOOM {
		t.Errorf("attached %s, want %s", tr.OOMProgram(), wantOOM)
	}
	// The helper probe against the kernel's own list of helpers: the
	// BPF_FUNC_get_current_task_btf value of its enum bpf_func_id.
	wantObject := ObjectCompat
	if kernelKnowsHelper(t, spec, "BPF_FUNC_get_current_task_btf") {
		wantObject = ObjectFast
	}
	t.Logf("loaded object %s", tr.Object())
	if tr.Object() != wantObject {
		t.Errorf("loaded %s, want %s", tr.Object(), wantObject)
	}
	if err := tr.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := tr.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func kernelKnowsHelper(t *testing.T, spec *btf.Spec, name string) bool {
	t.Helper()
	var ids *btf.Enum
	if err := spec.TypeByName("bpf_func_id", &ids); err != nil {
		t.Fatal(err)
	}
	for _, v := range ids.Values {
		if v.Name == name {
			return true
		}
	}
	return false
}

// A program that calls a helper the kernel does not have fails to load with
// the verifier's "invalid func unknown#N" (5.10) or "unknown func NAME"
// (newer kernels): the error must say so as a kernel too old for sigscope,
// with the version it needs, and wrap ErrUnsupported.
func TestMissingHelperIsNamed(t *testing.T) {
	for _, msg := range []string{
		"program handle_generate: load program: invalid argument: invalid func unknown#158",
		"program handle_generate: load program: invalid argument: unknown func bpf_get_current_task_btf#158",
	} {
		err := explainLoadError(errors.New(msg))
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "Linux 5.10") || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v", msg, err)
		}
	}
}
