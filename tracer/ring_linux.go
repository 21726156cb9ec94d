package tracer

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// The kernel's record header (struct bpf_ringbuf_hdr): a length whose two
// top bits say the record is still being written (busy) or was discarded,
// then a page offset only the kernel uses. Records are 8-byte aligned.
const (
	ringHdrSize    = 8
	ringBusyBit    = 1 << 31
	ringDiscardBit = 1 << 30
)

// readerSleeping is the reader_state value that asks the programs to ring
// the doorbell (READER_SLEEPING in bpf/sigscope.bpf.c).
const readerSleeping = 1

// ringView is one BPF ring buffer mapped into this process: the consumer
// page (writable), the producer page and the data area, mapped once. The
// kernel maps the data pages twice in a row so that a record wrapping
// around the end reads as contiguous memory, but it inserts every page of a
// mapping at mmap time, so a double mapping costs the ring's size again in
// resident memory (8 MiB by default); a record that wraps is copied instead.
type ringView struct {
	consPage []byte
	prodMap  []byte   // the producer page, then the data area
	cons     *uintptr // consumer position, written by us
	prod     *uintptr // producer position, written by the kernel
	data     []byte
	mask     uintptr
}

func mapRing(m *ebpf.Map) (ringView, error) {
	var v ringView
	size := int(m.MaxEntries())
	page := os.Getpagesize()
	if size < page || size&(size-1) != 0 {
		return v, fmt.Errorf("ring buffer of %d bytes: not a power of two of at least a page", size)
	}
	cons, err := unix.Mmap(m.FD(), 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return v, fmt.Errorf("mapping the consumer page: %w", err)
	}
	prod, err := unix.Mmap(m.FD(), int64(page), page+size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		_ = unix.Munmap(cons)
		return v, fmt.Errorf("mapping the ring's data: %w", err)
	}
	return ringView{
		consPage: cons,
		prodMap:  prod,
		cons:     (*uintptr)(unsafe.Pointer(&cons[0])),
		prod:     (*uintptr)(unsafe.Pointer(&prod[0])),
		data:     prod[page:],
		mask:     uintptr(size - 1),
	}, nil
}

func (v *ringView) unmap() error {
	if v.consPage == nil {
		return nil
	}
	err := errors.Join(unix.Munmap(v.prodMap), unix.Munmap(v.consPage))
	*v = ringView{}
	return err
}

// header reads the header of the record at position pos with an atomic
// load: it pairs with the kernel's xchg at commit, so once the busy bit is
// seen clear the record's data is visible too.
func (v *ringView) header(pos uintptr) uint32 {
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&v.data[pos&v.mask])))
}

// recordSize is the room a record of header hdr takes in the ring.
func recordSize(hdr uint32) uintptr {
	n := uintptr(hdr &^ (ringBusyBit | ringDiscardBit))
	return (n + ringHdrSize + 7) &^ 7
}

// drainStatus says why a drain stopped.
type drainStatus int

const (
	ringEmpty drainStatus = iota // every record written so far was read
	ringBusy                     // the next record is reserved but not committed yet: data is coming
	ringMore                     // a full batch, or a large one: read again at once
)

// ring reads the events ring buffer and sleeps on the doorbell ring. Only
// Run's goroutine calls drain, sleep and linger; interrupt and close may be
// called from any goroutine.
type ring struct {
	events   ringView
	bell     ringView
	state    []byte  // reader_state's page
	sleeping *uint32 // reader_state[0]
	batch    uintptr // bytes consumed before the consumer position is published
	scratch  []byte  // a record that wraps around the end of the ring, made contiguous

	epfd, evfd, bellFD int
	// nudgeFD wakes the reader for its Idle call (nudge), unlike evfd,
	// which ends Run; nudged says it did, read by Run's goroutine only.
	nudgeFD  int
	nudged   bool
	epEvents [3]unix.EpollEvent

	mu      sync.Mutex
	active  bool // a Run is using the mappings
	closing atomic.Bool
	freed   bool // mappings and descriptors released

	wrapped atomic.Uint64 // records copied because they wrap (tests)
	polls   atomic.Uint64 // epoll_wait returns, whatever woke it (tests)
}

func newRing(events, doorbell, state *ebpf.Map) (_ *ring, err error) {
	r := &ring{epfd: -1, evfd: -1, nudgeFD: -1}
	defer func() {
		if err != nil {
			r.free()
		}
	}()
	if r.events, err = mapRing(events); err != nil {
		return nil, err
	}
	if r.bell, err = mapRing(doorbell); err != nil {
		return nil, err
	}
	// Publish the consumer position after a quarter of the ring at most,
	// so that a long batch does not keep the producers short of room.
	r.batch = (r.events.mask + 1) / 4
	r.state, err = unix.Mmap(state.FD(), 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping the reader state: %w", err)
	}
	r.sleeping = (*uint32)(unsafe.Pointer(&r.state[0]))
	atomic.StoreUint32(r.sleeping, 0)

	if r.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	if r.evfd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	// The map's descriptor stays valid while the collection lives, which
	// outlives the ring (Tracer.Close frees the ring first).
	r.bellFD = doorbell.FD()
	// Edge-triggered: the doorbell reports each wakeup once. Level-triggered
	// it would report itself ready again while a record is reserved but not
	// committed at its consumer position, and the reader would spin.
	if err := unix.EpollCtl(r.epfd, unix.EPOLL_CTL_ADD, r.bellFD,
		&unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(r.bellFD)}); err != nil {
		return nil, fmt.Errorf("epoll_ctl doorbell: %w", err)
	}
	if err := unix.EpollCtl(r.epfd, unix.EPOLL_CTL_ADD, r.evfd,
		&unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(r.evfd)}); err != nil {
		return nil, fmt.Errorf("epoll_ctl eventfd: %w", err)
	}
	if r.nudgeFD, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	if err := unix.EpollCtl(r.epfd, unix.EPOLL_CTL_ADD, r.nudgeFD,
		&unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(r.nudgeFD)}); err != nil {
		return nil, fmt.Errorf("epoll_ctl eventfd: %w", err)
	}
	return r, nil
}

// nudge wakes a sleeping or lingering reader once, for its Idle call.
func (r *ring) nudge() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.freed {
		var one = [8]byte{1}
		_, _ = unix.Write(r.nudgeFD, one[:])
	}
}

// takeNudge reports whether a nudge woke the reader since the last call.
func (r *ring) takeNudge() bool {
	n := r.nudged
	r.nudged = false
	return n
}

// drain hands fn each record written since the last drain, in order, until
// the ring is empty, the next record is still being written, or a batch's
// worth was read. The consumer position is published once, at the end (the
// records fn saw stay in place until then: fn may read the ring's memory
// directly). An error from fn ends the drain after that record. A drain that
// took more than an eighth of the ring says ringMore too: the producers are
// fast enough to fill the ring during a linger.
func (r *ring) drain(fn func([]byte) error) (n int, st drainStatus, err error) {
	v := &r.events
	cons := atomic.LoadUintptr(v.cons)
	start := cons
	defer func() {
		if cons != start {
			atomic.StoreUintptr(v.cons, cons)
		}
	}()
	size := v.mask + 1
	for {
		prod := atomic.LoadUintptr(v.prod)
		if cons == prod {
			if cons-start > r.batch/2 {
				return n, ringMore, nil
			}
			return n, ringEmpty, nil
		}
		for cons != prod {
			if cons-start >= r.batch {
				return n, ringMore, nil
			}
			hdr := v.header(cons)
			if hdr&ringBusyBit != 0 {
				if cons-start > r.batch/2 {
					return n, ringMore, nil
				}
				return n, ringBusy, nil
			}
			total := recordSize(hdr)
			if total > prod-cons {
				return n, ringEmpty, fmt.Errorf("corrupt ring buffer: a record of %d bytes at %d, %d bytes written", total, cons, prod-cons)
			}
			if hdr&ringDiscardBit == 0 {
				length := uintptr(hdr &^ ringBusyBit)
				off := (cons + ringHdrSize) & v.mask
				var rec []byte
				if off+length <= size {
					rec = v.data[off : off+length : off+length]
				} else {
					r.scratch = append(append(r.scratch[:0], v.data[off:]...), v.data[:off+length-size]...)
					rec = r.scratch
					r.wrapped.Add(1)
				}
				n++
				if err := fn(rec); err != nil {
					cons += total
					return n, ringMore, err
				}
			}
			cons += total
		}
	}
}

// sleep waits for the doorbell, an interrupt or the timeout (negative: none)
// and reports whether the doorbell rang. It does not wait when a record came
// in the meantime. See wake_reader() in bpf/sigscope.bpf.c for why no
// wakeup can be lost.
func (r *ring) sleep(timeout time.Duration) (rang bool, err error) {
	// Consume the doorbell's records up to the first one still being
	// written: the commit of the record at the consumer position wakes us.
	b := &r.bell
	cons := atomic.LoadUintptr(b.cons)
	prod := atomic.LoadUintptr(b.prod)
	for cons != prod {
		hdr := b.header(cons)
		if hdr&ringBusyBit != 0 || recordSize(hdr) > prod-cons {
			break
		}
		cons += recordSize(hdr)
	}
	atomic.StoreUintptr(b.cons, cons)

	// Go's atomics are sequentially consistent: this store is ordered
	// before the loads that follow (a full barrier on every architecture).
	atomic.StoreUint32(r.sleeping, readerSleeping)
	defer atomic.StoreUint32(r.sleeping, 0)
	if e := &r.events; atomic.LoadUintptr(e.prod) != atomic.LoadUintptr(e.cons) {
		return false, nil // a record, committed or busy: data is coming
	}
	if atomic.LoadUintptr(b.prod) != cons && b.header(cons)&ringBusyBit == 0 {
		// Committed after the consumer position moved, possibly seeing the
		// old one: it may not have woken us. Events were written.
		return false, nil
	}
	return r.wait(timeout)
}

// linger waits for the timeout or an interrupt while the reader stays
// awake: the programs do not ring the doorbell then.
func (r *ring) linger(timeout time.Duration) error {
	_, err := r.wait(timeout)
	return err
}

func (r *ring) wait(timeout time.Duration) (rang bool, err error) {
	deadline := time.Now().Add(timeout)
	for {
		ms := -1
		if timeout >= 0 {
			// Round up: waking before the time asked for would only
			// wait again.
			ms = int((max(time.Until(deadline), 0) + time.Millisecond - 1) / time.Millisecond)
		}
		n, err := unix.EpollWait(r.epfd, r.epEvents[:], ms)
		if errors.Is(err, unix.EINTR) {
			continue // a signal handler ran (a profiler's SIGPROF)
		}
		if err != nil {
			return false, fmt.Errorf("epoll_wait: %w", err)
		}
		r.polls.Add(1)
		for _, ev := range r.epEvents[:n] {
			switch int(ev.Fd) {
			case r.bellFD:
				rang = true
			case r.nudgeFD:
				var buf [8]byte
				_, _ = unix.Read(r.nudgeFD, buf[:])
				r.nudged = true
			}
		}
		return rang, nil
	}
}

// start marks the ring in use by Run; false once closed.
func (r *ring) start() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing.Load() || r.freed {
		return false
	}
	// Forget an interrupt meant for an earlier Run.
	var buf [8]byte
	_, _ = unix.Read(r.evfd, buf[:])
	r.active = true
	return true
}

// stop ends Run's use; the ring is freed now if close came meanwhile.
func (r *ring) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active = false
	if r.closing.Load() {
		r.free()
	}
}

// interrupt wakes a sleeping or lingering reader; the eventfd stays
// readable, so every later wait returns at once.
func (r *ring) interrupt() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.freed {
		var one = [8]byte{1}
		_, _ = unix.Write(r.evfd, one[:])
	}
}

// closed reports whether close was called: Run then returns at once.
func (r *ring) closed() bool { return r.closing.Load() }

// close releases the ring, or asks a running Run to (its memory may be
// in use); the maps' own references keep the mappings valid until then.
func (r *ring) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closing.Store(true)
	if r.active {
		if !r.freed {
			var one = [8]byte{1}
			_, _ = unix.Write(r.evfd, one[:])
		}
		return
	}
	r.free()
}

// free unmaps and closes everything; with r.mu held, or before r is shared.
func (r *ring) free() {
	if r.freed {
		return
	}
	r.freed = true
	_ = r.events.unmap()
	_ = r.bell.unmap()
	if r.state != nil {
		_ = unix.Munmap(r.state)
		r.state, r.sleeping = nil, nil
	}
	for _, fd := range []int{r.epfd, r.evfd, r.nudgeFD} {
		if fd >= 0 {
			_ = unix.Close(fd)
		}
	}
	r.epfd, r.evfd, r.nudgeFD = -1, -1, -1
}

// syncPrograms waits until no program run that began before it is still
// going: a tracepoint's programs run with preemption off, and
// membarrier(MEMBARRIER_CMD_GLOBAL) is a synchronize_rcu(). Detaching does
// not wait for them, and a run that had just begun would otherwise write its
// record (and count it) after the final drain. Without membarrier (seccomp,
// nohz_full) such a record is only counted, not read.
func syncPrograms() {
	const membarrierCmdGlobal = 1
	_, _, _ = unix.Syscall(unix.SYS_MEMBARRIER, membarrierCmdGlobal, 0, 0)
}
