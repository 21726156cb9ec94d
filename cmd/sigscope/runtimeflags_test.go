package main

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/sigscope/sigscope/containers/container"
)

func TestRuntimeFlagsOnEveryResolvingCommand(t *testing.T) {
	root := newRootCmd()
	for _, name := range []string{"trace", "timeline", "audit", "serve"} {
		cmd, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		for _, flag := range []string{"docker-socket", "cri-socket"} {
			if cmd.Flags().Lookup(flag) == nil {
				t.Errorf("sigscope %s has no --%s", name, flag)
			}
		}
	}
}

func TestRuntimeFlagsOptions(t *testing.T) {
	var f runtimeFlags
	fl := pflag.NewFlagSet("test", pflag.ContinueOnError)
	f.register(fl)
	if err := fl.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if o := f.options(); o.DockerSocket != "" || o.CRISockets != nil {
		t.Fatalf("no flags: %+v, want the resolver's defaults (empty, nil)", o)
	}
	err := fl.Parse([]string{"--docker-socket", "/d.sock", "--cri-socket", "/a.sock", "--cri-socket", "unix:///b,c.sock"})
	if err != nil {
		t.Fatal(err)
	}
	o := f.options()
	if o.DockerSocket != "/d.sock" || !reflect.DeepEqual(o.CRISockets, []string{"/a.sock", "unix:///b,c.sock"}) {
		t.Fatalf("options %+v", o)
	}
}

// Sockets named on the command line that do not exist: one warning each,
// and the resolver still works (from cgroup paths).
func TestRuntimeFlagsMissingSocketsWarnOnce(t *testing.T) {
	var logs bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	dir := t.TempDir()
	f := runtimeFlags{dockerSocket: filepath.Join(dir, "docker.sock"), criSockets: []string{filepath.Join(dir, "a.sock"), filepath.Join(dir, "b.sock")}}
	opts := f.options()
	opts.NoCgroupWatch = true
	r := container.NewResolver(opts)
	defer r.Close()
	warns := strings.Count(logs.String(), "level=WARN")
	for _, s := range append([]string{f.dockerSocket}, f.criSockets...) {
		if strings.Count(logs.String(), "endpoint="+s+" ") != 1 {
			t.Errorf("%s not named once in:\n%s", s, logs.String())
		}
	}
	if warns != 3 {
		t.Errorf("%d warnings, want 3:\n%s", warns, logs.String())
	}
}

// audit with only missing sockets has nothing to list: it says where it
// looked, which shows the flags reach the resolver.
func TestAuditUsesRuntimeFlags(t *testing.T) {
	dir := t.TempDir()
	d, c := filepath.Join(dir, "docker.sock"), filepath.Join(dir, "cri.sock")
	root := newRootCmd()
	root.SetArgs([]string{"audit", "--log-level", "error", "--docker-socket", d, "--cri-socket", c})
	root.SetOut(&bytes.Buffer{})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), d) || !strings.Contains(err.Error(), c) {
		t.Fatalf("audit: %v, want an error naming %s and %s", err, d, c)
	}
}
