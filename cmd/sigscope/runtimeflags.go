package main

import (
	"log/slog"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sigscope/sigscope/containers/container"
)

// runtimeFlags are the container runtime endpoints, the same on every
// command that resolves containers (trace, timeline, audit, serve).
type runtimeFlags struct {
	dockerSocket string
	criSockets   []string
	runtimeFiles bool
}

func (f *runtimeFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.dockerSocket, "docker-socket", "",
		"Docker Engine API socket `path` (default "+container.DefaultDockerSocket+")")
	fl.StringArrayVar(&f.criSockets, "cri-socket", nil,
		"CRI runtime socket `path`, repeatable; replaces the defaults ("+strings.Join(container.DefaultCRISockets, ", ")+")")
	fl.BoolVar(&f.runtimeFiles, "runtime-files", true,
		"read containers' names from the runtimes' own files first (Docker's container records, containerd's and CRI-O's OCI bundles, through the daemons' /proc/PID/root), then ask their APIs; false: the APIs only (docs/security.md)")
}

// options are the resolver options the flags give, logging to slog's
// default: unset flags leave the defaults, and a socket named here that
// does not exist is warned about.
func (f *runtimeFlags) options() container.Options {
	return container.Options{DockerSocket: f.dockerSocket, CRISockets: f.criSockets, NoRuntimeFiles: !f.runtimeFiles, Logger: slog.Default()}
}
