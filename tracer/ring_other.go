//go:build !linux

package tracer

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
)

// The reader needs epoll and the kernel's BPF ring buffer: Linux only. This
// lets the package's types build elsewhere (see clock_other.go).

type drainStatus int

const (
	ringEmpty drainStatus = iota
	ringBusy
	ringMore
)

type ring struct {
	wrapped, polls atomic.Uint64
}

func newRing(_, _, _ *ebpf.Map) (*ring, error) {
	return nil, errors.New("the ring buffer reader needs Linux")
}

func (r *ring) drain(func([]byte) error) (int, drainStatus, error) { return 0, ringEmpty, nil }
func (r *ring) sleep(time.Duration) (bool, error)                  { return false, nil }
func (r *ring) linger(time.Duration) error                         { return nil }
func (r *ring) start() bool                                        { return false }
func (r *ring) stop()                                              {}
func (r *ring) interrupt()                                         {}
func (r *ring) nudge()                                             {}
func (r *ring) takeNudge() bool                                    { return false }
func (r *ring) closed() bool                                       { return true }
func (r *ring) close()                                             {}

func syncPrograms() {}
