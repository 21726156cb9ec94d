package container

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// The runtime daemons whose files name containers: found in /proc by their
// command names, their directories read from their command lines and
// configuration files (files.go says which, per runtime), every path
// reached through the daemon's own root.

// scan finds the runtime daemons in /proc by their command names.
func (f *runtimeFiles) scan() []runtimeDaemon {
	ents, err := os.ReadDir(f.procRoot)
	if err != nil {
		return nil
	}
	self, _ := os.Readlink(filepath.Join(f.procRoot, "self", "ns", "pid"))
	var out []runtimeDaemon
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		dir := filepath.Join(f.procRoot, e.Name())
		comm, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil {
			continue
		}
		var runtime string
		switch strings.TrimSpace(string(comm)) {
		case "dockerd":
			runtime = RuntimeDocker
		case "containerd":
			runtime = RuntimeContainerd
		case "crio":
			runtime = RuntimeCRIO
		default:
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		d := runtimeDaemon{runtime: runtime, pid: pid, root: filepath.Join(dir, "root")}
		if _, err := os.Stat(d.root + "/"); err != nil {
			d.root = "" // ptrace access refused: the agent's own view
		}
		if ns, err := os.Readlink(filepath.Join(dir, "ns", "pid")); err == nil && ns == self {
			d.hostPIDs = true
		}
		switch runtime {
		case RuntimeDocker:
			d.dirs = []string{d.dockerDataRoot(args[1:])}
		case RuntimeContainerd:
			d.dirs = []string{d.containerdState(args[1:])}
		case RuntimeCRIO:
			d.dirs = d.crioRoots(args[1:])
		}
		out = append(out, d)
	}
	return out
}

// flagValue returns the value of the last of names in args ("--name v",
// "--name=v", "-n v"), and whether one was given.
func flagValue(args []string, names ...string) (string, bool) {
	v, found := "", false
	for i := 0; i < len(args); i++ {
		a := args[i]
		for _, n := range names {
			switch {
			case a == n && i+1 < len(args):
				v, found = args[i+1], true
			case strings.HasPrefix(a, n+"="):
				v, found = a[len(n)+1:], true
			}
		}
	}
	return v, found
}

// path is p (as the daemon sees it) as the agent reaches it.
func (d *runtimeDaemon) path(p string) string {
	if !filepath.IsAbs(p) {
		p = "/" + p
	}
	return d.root + filepath.Clean(p)
}

// readFile reads the daemon's file p, at most maxRuntimeFile.
func (d *runtimeDaemon) readFile(p string) ([]byte, error) {
	fh, err := os.Open(d.path(p))
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return io.ReadAll(io.LimitReader(fh, maxRuntimeFile))
}

func (d *runtimeDaemon) dockerDataRoot(args []string) string {
	if v, ok := flagValue(args, "--data-root", "-g", "--graph"); ok {
		return v
	}
	conf, _ := flagValue(args, "--config-file")
	if conf == "" {
		conf = "/etc/docker/daemon.json"
	}
	var c struct {
		DataRoot string `json:"data-root"`
		Graph    string `json:"graph"`
	}
	if b, err := d.readFile(conf); err == nil && json.Unmarshal(b, &c) == nil {
		if c.DataRoot != "" {
			return c.DataRoot
		}
		if c.Graph != "" {
			return c.Graph
		}
	}
	return "/var/lib/docker"
}

func (d *runtimeDaemon) containerdState(args []string) string {
	if v, ok := flagValue(args, "--state"); ok {
		return v
	}
	conf, _ := flagValue(args, "--config", "-c")
	if conf == "" {
		conf = "/etc/containerd/config.toml"
	}
	var c struct {
		State string `toml:"state"`
	}
	if b, err := d.readFile(conf); err == nil && toml.Unmarshal(b, &c) == nil && c.State != "" {
		return c.State
	}
	return "/run/containerd"
}

// crioRoots returns CRI-O's run root and root, as its flags, its
// configuration (the file, then its drop-in directory in name order) and
// containers-storage's say, in that order of precedence.
func (d *runtimeDaemon) crioRoots(args []string) []string {
	runroot, root := "/run/containers/storage", "/var/lib/containers/storage"
	var sc struct {
		Storage struct {
			RunRoot   string `toml:"runroot"`
			GraphRoot string `toml:"graphroot"`
		} `toml:"storage"`
	}
	if b, err := d.readFile("/etc/containers/storage.conf"); err == nil && toml.Unmarshal(b, &sc) == nil {
		runroot, root = cmpOr(sc.Storage.RunRoot, runroot), cmpOr(sc.Storage.GraphRoot, root)
	}
	conf, _ := flagValue(args, "--config", "-c")
	if conf == "" {
		conf = "/etc/crio/crio.conf"
	}
	confs := []string{conf}
	confDir, _ := flagValue(args, "--config-dir", "-d")
	if confDir == "" {
		confDir = "/etc/crio/crio.conf.d"
	}
	if ents, err := os.ReadDir(d.path(confDir)); err == nil {
		for _, e := range ents {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".conf") {
				confs = append(confs, filepath.Join(confDir, e.Name()))
			}
		}
	}
	for _, p := range confs {
		var c struct {
			Crio struct {
				Root    string `toml:"root"`
				RunRoot string `toml:"runroot"`
			} `toml:"crio"`
		}
		if b, err := d.readFile(p); err == nil && toml.Unmarshal(b, &c) == nil {
			runroot, root = cmpOr(c.Crio.RunRoot, runroot), cmpOr(c.Crio.Root, root)
		}
	}
	if v, ok := flagValue(args, "--runroot"); ok {
		runroot = v
	}
	if v, ok := flagValue(args, "--root", "-r"); ok {
		root = v
	}
	return []string{runroot, root}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
