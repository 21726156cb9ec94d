package container

import (
	"context"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
)

// runtimeAPI is one container runtime's API at one endpoint: the Docker
// Engine API (docker.go) or a CRI endpoint (cri.go). The resolver asks
// every runtime the same things through it: describe a container, list
// the running ones; whether its endpoint is healthy it keeps itself, by
// endpoint (endpoints.go). A new runtime implements it in one file, and
// says in askRuntime (enrich.go) which containers' cgroups it is asked
// about.
type runtimeAPI interface {
	// source is the error source its failures count under in
	// [Resolver.Errors]: SourceDocker or SourceCRI.
	source() string
	// endpoint is its socket: what its health, its warnings and its
	// owners (owners.go) are keyed by.
	endpoint() string
	// present reports whether its socket exists. A node runs one or two of
	// the runtimes sigscope knows: a missing socket is a runtime that is
	// not installed, and listing skips it.
	present() bool
	// describe describes a container or pod sandbox, or says errNotFound
	// when the runtime answered and does not know it.
	describe(ctx context.Context, ref runtimeRef) (*runtimeAnswer, error)
	// list returns the running containers, and the ready pod sandboxes
	// too when sandboxes is set.
	list(ctx context.Context, sandboxes bool) ([]runtimeRef, error)
	// close releases its connections.
	close() error
}

// stopHistorian is a runtime that keeps a record of the stop signals it
// sent (Docker's events), for [Resolver.StopHistory].
type stopHistorian interface {
	// stopHistory returns the stop signals sent between from and to, and
	// from when on the record is complete (the zero time: all along).
	stopHistory(ctx context.Context, from, to time.Time) ([]identity.StopRequest, time.Time, error)
	// historyRuntime is the Info.Runtime the history answers for.
	historyRuntime() string
}

// runtimeRef names a container to its runtime: by ID, and, when a list
// said so, whether it is a pod sandbox, which a CRI runtime is asked about
// with another call.
type runtimeRef struct {
	id   string
	kind refKind
}

type refKind uint8

const (
	refAny       refKind = iota // a container or a pod sandbox: the cgroups look alike
	refContainer                // listed as a container
	refSandbox                  // listed as a pod sandbox
)

// runtimeAnswer is what a runtime said about one container.
type runtimeAnswer struct {
	// info is never nil. Its Runtime is the runtime's name ("docker",
	// "containerd", "cri-o"), "" when it could not say which it is.
	info *identity.Info
	// notStarted: the runtime knows the container but has not started it
	// yet (no main pid yet): asking again later gives one.
	notStarted bool
	// stopped: the runtime says it does not run (any more). Docker says so
	// in its inspect; a CRI listing is filtered by state already and this
	// is never set.
	stopped bool
}
