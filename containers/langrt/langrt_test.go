package langrt

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
)

func TestFromName(t *testing.T) {
	for name, want := range map[string]Runtime{
		"node": NodeJS, "nodejs": NodeJS, "java": JVM, "python3": CPython, "python3.11": CPython, "python": CPython,
		"python3.11d": CPython, "pythonista": Unknown, "ruby": Ruby, "ruby3.1": Ruby, "rubyist": Unknown, "perl": Perl,
		"perl5.36.0": Perl, "sh": Shell, "/bin/bash": Shell, "busybox": Shell, "tini": Init, "docker-init": Init,
		"catatonit": Init, "server": Unknown, "": Unknown,
	} {
		if got := FromName(name); got != want {
			t.Errorf("FromName(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestFacts(t *testing.T) {
	for r := range facts {
		if r == Unknown {
			continue
		}
		if !Known(r) || r.Name() == "" || r.SlowFix() == "" {
			t.Errorf("%q: name %q, slow fix %q", r, r.Name(), r.SlowFix())
		}
		if r != Init && r.HandleFix() == "" {
			t.Errorf("%q has no fix for a missing handler", r)
		}
	}
	if Known(Unknown) || Known("cobol") {
		t.Error("Known accepts an unknown runtime")
	}
	if !NodeJS.Reraises() || !Go.Reraises() || JVM.Reraises() || CPython.Reraises() {
		t.Error("Reraises: Node.js and Go re-raise, the JVM and CPython do not")
	}
	if Go.ExitAfterReraise() != 2 || NodeJS.ExitAfterReraise() != 0 {
		t.Error("ExitAfterReraise: the Go runtime exits 2, Node.js does not exit")
	}
}

// Detect reads real processes: this test binary (the Go runtime), and the
// interpreters installed here.
func TestDetect(t *testing.T) {
	if got := Detect("", os.Getpid()); got != Go {
		t.Errorf("Detect(self, a Go test binary) = %q, want go", got)
	}
	if got := Detect(t.TempDir(), 1); got != Unknown {
		t.Errorf("Detect of a missing process = %q", got)
	}
	// busybox is the executable of every applet: its sleep is no shell,
	// its sh is.
	proc := t.TempDir()
	for pid, p := range map[string]struct{ exe, comm string }{"10": {"/bin/busybox", "sleep"}, "11": {"/bin/busybox", "sh"}} {
		dir := filepath.Join(proc, pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p.exe, filepath.Join(dir, "exe")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "comm"), []byte(p.comm+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(p.comm+"\x001000\x00"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := Detect(proc, 10); got != Unknown {
		t.Errorf("Detect(busybox sleep) = %q, want unknown", got)
	}
	if got := Detect(proc, 11); got != Shell {
		t.Errorf("Detect(busybox sh) = %q, want shell", got)
	}
	for _, c := range []struct {
		want Runtime
		argv []string
	}{
		{Shell, []string{"sh", "-c", "sleep 5; :"}},
		{CPython, []string{"python3", "-c", "import time; time.sleep(5)"}},
		{NodeJS, []string{"node", "-e", "setTimeout(() => {}, 5000)"}},
		{Perl, []string{"perl", "-e", "sleep 5"}},
	} {
		path, err := exec.LookPath(c.argv[0])
		if err != nil {
			t.Logf("%s is not installed here: not checked", c.argv[0])
			continue
		}
		cmd := exec.Command(path, c.argv[1:]...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The exe link names the interpreter once exec is done.
		var got Runtime
		testutil.Poll(20*time.Millisecond, func() bool { got = Detect("", cmd.Process.Pid); return got == c.want })
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if got != c.want {
			t.Errorf("Detect(%v) = %q, want %q", c.argv, got, c.want)
		}
	}
}
