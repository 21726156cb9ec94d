package container

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sigscope/sigscope/internal/retry"
)

// warnMissing warns once about each socket in given, the ones the user
// named, that does not exist. A missing socket only costs enrichment;
// failures to reach it later are logged at debug.
func (r *Resolver) warnMissing(given []string) {
	missing := 0
	for _, s := range given {
		fi, err := os.Stat(s)
		var pe *fs.PathError
		switch {
		case errors.As(err, &pe):
			err = pe.Err // the path is the endpoint already
		case err == nil && fi.Mode()&os.ModeSocket == 0:
			err = errors.New("not a socket")
		}
		if err == nil {
			continue
		}
		if slices.Contains(r.opts.CRISockets, s) {
			missing++
		}
		r.errMu.Lock()
		first := !r.warned[s]
		r.warned[s] = true
		r.errMu.Unlock()
		if first {
			r.log.Warn("container runtime socket not found; container IDs still come from cgroup paths", "endpoint", s, "err", err)
		}
	}
	if missing > 0 && missing == len(r.opts.CRISockets) {
		// fromCRI's "no CRI socket found" would say it again.
		r.errMu.Lock()
		r.warned[strings.Join(r.opts.CRISockets, " ")] = true
		r.errMu.Unlock()
	}
}

// outage is a runtime endpoint that failed and has not answered since.
type outage struct {
	until time.Time // not asked again before (isDown)
	since time.Time // when until was last pushed back
	// sock is the endpoint's socket file as it was when it failed: a
	// runtime that restarts makes a new one, and is asked again at once.
	sock    fileID
	backoff retry.Backoff
	err     error // the last failure, for what an unnamed container says (Why)
}

// Bounds of the time a failing runtime endpoint is left alone: a daemon
// slow for a moment under load (one call past APITimeout) is asked again
// a second later, and one that keeps failing at most every retryInterval,
// so a hung runtime costs one timeout per interval, not one per new
// container. Containers whose enrichment failed meanwhile are asked again
// when it answers (prefetch.go), so a moment's stall costs no names.
const outageMin = time.Second

// fail counts an error from source and logs it: at warn the first time
// since the endpoint (a socket path; "" for /proc and cgroups) last
// worked, at debug after that, so an unreachable runtime writes one line,
// not one per container, and each of two broken CRI sockets says so once.
// A failing runtime endpoint is not asked again for a while: a second
// after its first failure, twice as long after each next one, up to
// retryInterval.
func (r *Resolver) fail(source, endpoint string, err error) {
	r.failSince(source, endpoint, err, time.Time{})
}

// failSince is fail for a request to endpoint sent at sent: one that was
// in flight when the endpoint was last found failing is the same outage
// (a stall times out every request it holds), and does not lengthen the
// time the endpoint is left alone; a request sent after that does.
func (r *Resolver) failSince(source, endpoint string, err error, sent time.Time) {
	if errors.Is(err, errNoCRI) {
		r.notARuntime(endpoint, err)
		return
	}
	key := endpoint
	if key == "" {
		key = source
	}
	var sock fileID
	if endpoint != "" {
		sock = socketFile(endpoint)
	}
	r.errMu.Lock()
	r.errs[source]++
	first := !r.warned[key]
	r.warned[key] = true
	if endpoint != "" {
		o := r.down[endpoint]
		if o == nil {
			o = &outage{backoff: retry.Backoff{Min: outageMin, Max: max(r.retryInterval, outageMin)}}
			r.down[endpoint] = o
		}
		now := r.now()
		if o.since.IsZero() || sent.IsZero() || !sent.Before(o.since) {
			o.until, o.since = now.Add(o.backoff.Next(0)), now
		}
		o.sock, o.err = sock, err
	}
	r.errMu.Unlock()
	attrs := []any{"source", source}
	if endpoint != "" {
		attrs = append(attrs, "endpoint", endpoint)
	}
	attrs = append(attrs, "err", err)
	if first {
		r.log.Warn("container metadata source failed; container IDs still come from cgroup paths", attrs...)
	} else {
		r.log.Debug("container metadata source failed", attrs...)
	}
}

// sayFound says, at info, which runtime sockets exist and which do not:
// most hosts run one runtime, and the others' absence is no error.
func (r *Resolver) sayFound() {
	var found, absent []string
	for _, a := range r.runtimes {
		if a.present() {
			found = append(found, a.source()+" "+a.endpoint())
		} else {
			absent = append(absent, a.endpoint())
		}
	}
	r.log.Info("container runtimes", "found", found, "absent", absent)
}

// notARuntime notes a CRI socket that serves no CRI API (a containerd with
// its CRI plugin disabled: Docker's, on a Docker host): an absent runtime,
// not a failing one. Not counted; said once, at info.
func (r *Resolver) notARuntime(endpoint string, err error) {
	r.errMu.Lock()
	first := !r.warned["nocri "+endpoint]
	r.warned["nocri "+endpoint] = true
	r.errMu.Unlock()
	if first {
		r.log.Info("not a CRI runtime: the socket serves no CRI API (a containerd with its CRI plugin disabled, as Docker's is); not asked again",
			"endpoint", endpoint, "err", err)
	}
}

// ok notes that endpoint of source answered.
func (r *Resolver) ok(source, endpoint string) {
	r.errMu.Lock()
	was := r.warned[endpoint]
	r.warned[endpoint] = false
	_, failing := r.down[endpoint]
	delete(r.down, endpoint)
	r.errMu.Unlock()
	if failing {
		// The containers it could not be asked about are asked now.
		r.recheckFailedNow()
	}
	if was {
		r.log.Info("container metadata source answers again", "source", source, "endpoint", endpoint)
	}
}

// isDown reports whether endpoint failed and is left alone still, and is
// the same socket: a daemon restarted since (dockerd, containerd) has made
// a new one, and the containers started right after it are named at once.
func (r *Resolver) isDown(endpoint string) bool {
	r.errMu.Lock()
	o := r.down[endpoint]
	var until time.Time
	var sock fileID
	if o != nil {
		until, sock = o.until, o.sock
	}
	r.errMu.Unlock()
	if o == nil || !r.now().Before(until) {
		return false
	}
	return socketFile(endpoint) == sock
}

// lastErr is endpoint's last failure while it has not answered since; nil
// when it is not failing.
func (r *Resolver) lastErr(endpoint string) error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if o := r.down[endpoint]; o != nil {
		return o.err
	}
	return nil
}

// fileID is a file's identity; zero for none. The modification time is
// part of it: a file system may give a new socket the inode of the one
// just removed (ext4 does), but not the same time.
type fileID struct {
	dev, ino uint64
	mtime    int64
}

// socketFile is the identity of the socket file at path, zero when there
// is none (a daemon that stopped cleanly removed it).
func socketFile(path string) fileID {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}
	}
	id := fileID{mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = uint64(st.Dev), st.Ino
	}
	return id
}

// Errors returns how many errors each source has had since the resolver
// was made: "docker", "cri", "proc", "cgroup". Monotonic, never reset.
func (r *Resolver) Errors() map[string]uint64 {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	out := make(map[string]uint64, len(r.errs))
	for k, v := range r.errs {
		out[k] = v
	}
	return out
}
