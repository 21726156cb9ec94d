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
}

func (f *runtimeFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.dockerSocket, "docker-socket", "",
		"Docker Engine API socket `path` (default "+container.DefaultDockerSocket+")")
	fl.StringArrayVar(&f.criSockets, "cri-socket", nil,
		"CRI runtime socket `path`, repeatable; replaces the defaults ("+strings.Join(container.DefaultCRISockets, ", ")+")")
}

// options are the resolver options the flags give, logging to slog's
// default: unset flags leave the defaults, and a socket named here that
// does not exist is warned about.
func (f *runtimeFlags) options() container.Options {
	return container.Options{DockerSocket: f.dockerSocket, CRISockets: f.criSockets, Logger: slog.Default()}
}
