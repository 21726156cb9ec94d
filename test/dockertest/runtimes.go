package dockertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sigscope/sigscope/test/testutil"
)

// HostRuntime is a language runtime installed on the host from a Debian
// package, run in a container built FROM scratch: no registry is reachable
// here, so instead of a node or python image the container gets the host's
// /usr through read-only binds (with /usr/lib as /lib and /usr/lib64 as
// /lib64 for the dynamic loader and the libraries), plus whatever the
// runtime reads outside /usr.
type HostRuntime struct {
	Name    string // what the tests call it: "node", "python3", "java"
	Package string // the Debian package that installs it
	// Path is the executable as the container runs it: a path under /usr
	// that resolves without /etc/alternatives (which is not bound).
	Path string
	// Etc are host directories outside /usr that the runtime needs, bound
	// read-only at the same path (the JVM's lib/jvm.cfg is a link into
	// /etc/java-17-openjdk).
	Etc []string
}

// NodeJS is Debian's nodejs.
func NodeJS() HostRuntime {
	return HostRuntime{Name: "node", Package: "nodejs", Path: "/usr/bin/node"}
}

// Python3 is Debian's python3: /usr/bin/python3, never a python3 earlier on
// PATH (a pyenv shim, /usr/local/bin).
func Python3() HostRuntime {
	return HostRuntime{Name: "python3", Package: "python3", Path: "/usr/bin/python3"}
}

// Java17 is Debian's openjdk-17-jre-headless. Its modules image holds
// jdk.compiler too, so `java App.java` (a single-file source launch) runs
// without the JDK package.
func Java17(t testing.TB) HostRuntime {
	t.Helper()
	home := "/usr/lib/jvm/java-17-openjdk-" + debianArch(t)
	return HostRuntime{Name: "java", Package: "openjdk-17-jre-headless", Path: home + "/bin/java",
		Etc: []string{"/etc/java-17-openjdk"}}
}

var (
	archOnce sync.Once
	arch     string
	archErr  error
)

// debianArch is dpkg's name for this machine's architecture ("amd64"), as
// in the JVM's directory name.
func debianArch(t testing.TB) string {
	t.Helper()
	archOnce.Do(func() {
		out, err := exec.Command("dpkg", "--print-architecture").Output()
		arch, archErr = strings.TrimSpace(string(out)), err
		if err == nil && arch == "" {
			archErr = fmt.Errorf("empty output")
		}
	})
	if archErr != nil {
		t.Fatalf("dockertest: dpkg --print-architecture: %v", archErr)
	}
	return arch
}

// EnsureHostRuntimes installs the Debian packages of the runtimes missing
// from the host (one apt-get for all of them) and checks that each
// executable is then there.
func EnsureHostRuntimes(t testing.TB, rts ...HostRuntime) {
	t.Helper()
	testutil.RequirePrivileged(t)
	var missing []string
	for _, rt := range rts {
		if _, err := os.Stat(rt.Path); err != nil {
			missing = append(missing, rt.Package)
		}
	}
	if len(missing) > 0 {
		AptInstall(t, missing...)
	}
	for _, rt := range rts {
		if _, err := os.Stat(rt.Path); err != nil {
			t.Fatalf("dockertest: %s: %v after apt-get install %s", rt.Name, err, rt.Package)
		}
		for _, dir := range rt.Etc {
			if _, err := os.Stat(dir); err != nil {
				t.Fatalf("dockertest: %s needs %s: %v", rt.Name, dir, err)
			}
		}
	}
}

// HostRuntimeArgs are the `docker run` arguments (before the image) that
// give a container FROM scratch the host's runtimes: /usr, /usr/lib as
// /lib and /usr/lib64 as /lib64, and each runtime's Etc, all read-only.
func HostRuntimeArgs(rts ...HostRuntime) []string {
	binds := []string{"/usr:/usr", "/usr/lib:/lib"}
	if _, err := os.Stat("/usr/lib64"); err == nil {
		binds = append(binds, "/usr/lib64:/lib64")
	}
	seen := map[string]bool{}
	for _, rt := range rts {
		for _, dir := range rt.Etc {
			if !seen[dir] {
				seen[dir] = true
				binds = append(binds, dir+":"+dir)
			}
		}
	}
	var args []string
	for _, b := range binds {
		args = append(args, "--volume", b+":ro")
	}
	return args
}

// BuildAppImage builds tag as BuildBusyboxImage does (FROM scratch,
// busybox for /bin/sh), with the files of dir (not its subdirectories)
// copied to /app, modes kept. With HostRuntimeArgs its containers run the
// host's runtimes on those files.
func BuildAppImage(t testing.TB, tag, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.TempDir()
	app := filepath.Join(ctx, "app")
	if err := os.Mkdir(app, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(app, e.Name()), data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return BuildBusyboxImageWith(t, tag, ctx, "COPY app/ /app/")
}
