package dockertest

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// busyboxPath is Debian's busybox-static: one static binary, so an image
// FROM scratch needs nothing else.
const busyboxPath = "/bin/busybox"

// BuildBusyboxImage builds tag FROM scratch: /bin/busybox with a symlink
// for each applet (so /bin/sh exists), then extraDockerfileLines. It
// installs busybox-static when /bin/busybox is missing, and returns tag.
//
// The build runs with --network none: the daemon has no bridge, so any RUN
// line in extraDockerfileLines gets no network either.
func BuildBusyboxImage(t testing.TB, tag, extraDockerfileLines string) string {
	t.Helper()
	return BuildBusyboxImageWith(t, tag, t.TempDir(), extraDockerfileLines)
}

// BuildBusyboxImageWith is BuildBusyboxImage with dir as the build
// context: whatever the caller put there can be COPYed by
// extraDockerfileLines. dir must not hold rootfs/ or a Dockerfile.
func BuildBusyboxImageWith(t testing.TB, tag, dir, extraDockerfileLines string) string {
	t.Helper()
	d := EnsureDaemon(t)
	if !IsStatic(busyboxPath) {
		AptInstall(t, "busybox-static")
	}
	bin := filepath.Join(dir, "rootfs", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"tmp", "etc"} {
		if err := os.MkdirAll(filepath.Join(dir, "rootfs", sub), 0o1777); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(busyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "busybox"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	list, err := exec.Command(busyboxPath, "--list").Output()
	if err != nil {
		t.Fatalf("busybox --list: %v", err)
	}
	// Symlinks in the context rather than a RUN --install: a RUN step
	// needs a build container, and COPY keeps symlinks as they are.
	for _, applet := range strings.Fields(string(list)) {
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(bin, applet)); err != nil {
			t.Fatal(err)
		}
	}
	dockerfile := "FROM scratch\nCOPY rootfs/ /\n" + extraDockerfileLines + "\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	d.Docker(t, "build", "--quiet", "--network", "none", "--tag", tag, dir)
	return tag
}

// IsStatic reports whether the ELF binary at path runs without a dynamic
// loader, as a FROM scratch image needs: Debian's plain busybox package is
// dynamically linked and would not start there.
func IsStatic(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}
