package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// floorPoll is how often the (e) reader drains the floor's ring. Its
// records are submitted without a wakeup, so the reader polls: at 3 M
// signals/s, 10 ms is under 0.5 MiB of 16-byte records in an 8 MiB ring.
const floorPoll = 10 * time.Millisecond

// floorAttach is (0), (e) or (t): one program of floor.bpf.c on
// signal_generate, and for (e) and (t) a reader that drains its ring in this
// process.
type floorAttach struct {
	stats   io.Closer // BPF_ENABLE_STATS while attached, with -bpf-stats
	prog    *ebpf.Program
	records *ebpf.Map
	dropped *ebpf.Variable
	lnk     link.Link
	rd      *ringbuf.Reader
	read    atomic.Uint64
	done    chan error
}

func attachFloor(c config, ringSize int, bpfStats bool) (*floorAttach, error) {
	spec, err := loadFloor()
	if err != nil {
		return nil, err
	}
	spec.Maps[floorMapRecords].MaxEntries = uint32(ringSize)
	f := &floorAttach{}
	if bpfStats {
		if f.stats, err = ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err != nil {
			return nil, fmt.Errorf("enabling BPF run-time statistics: %w", err)
		}
	}
	// (0) loads its program alone, with no map; (e) and (t) share the ring,
	// so both load and the one the phase does not run is closed.
	if c == noop {
		var objs struct {
			Noop *ebpf.Program `ebpf:"noop"`
		}
		if err := spec.LoadAndAssign(&objs, nil); err != nil {
			f.close()
			return nil, fmt.Errorf("loading the no-op program: %w", err)
		}
		f.prog = objs.Noop
	} else {
		var objs struct {
			Empty   *ebpf.Program  `ebpf:"empty"`
			Stamped *ebpf.Program  `ebpf:"stamped"`
			Records *ebpf.Map      `ebpf:"records"`
			Dropped *ebpf.Variable `ebpf:"dropped"`
		}
		if err := spec.LoadAndAssign(&objs, nil); err != nil {
			f.close()
			return nil, fmt.Errorf("loading the floor's record programs: %w", err)
		}
		f.prog, f.records, f.dropped = objs.Empty, objs.Records, objs.Dropped
		unused := objs.Stamped
		if c == stamped {
			f.prog, unused = objs.Stamped, objs.Empty
		}
		unused.Close()
		if f.rd, err = ringbuf.NewReader(f.records); err != nil {
			f.close()
			return nil, fmt.Errorf("opening the floor's ring: %w", err)
		}
		f.done = make(chan error, 1)
		go f.drain()
	}
	if f.lnk, err = link.AttachTracing(link.TracingOptions{Program: f.prog}); err != nil {
		f.close()
		return nil, fmt.Errorf("attaching the %s program: %w", c, err)
	}
	return f, nil
}

// drain reads the ring until it is closed: the records are empty, so it
// only counts them.
func (f *floorAttach) drain() {
	var rec ringbuf.Record
	for {
		f.rd.SetDeadline(time.Now().Add(floorPoll))
		for {
			err := f.rd.ReadInto(&rec)
			if err == nil {
				f.read.Add(1)
				continue
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			if errors.Is(err, ringbuf.ErrClosed) {
				err = nil
			}
			f.done <- err
			return
		}
	}
}

func (f *floorAttach) cpu() (time.Duration, error) { return cpuTime(), nil }

// stop detaches the program first, so that nothing is written after the
// reader's last drain, then drains what is left.
func (f *floorAttach) stop(p *phase) (time.Duration, error) {
	err := f.lnk.Close()
	f.lnk = nil
	if f.rd != nil {
		// One more poll than the reader's own: everything submitted
		// before the detach has been read.
		time.Sleep(2 * floorPoll)
		err = errors.Join(err, f.rd.Close(), <-f.done)
		f.rd = nil
		var d uint64
		err = errors.Join(err, f.dropped.Get(&d))
		p.read, p.dropped = f.read.Load(), d
	}
	end := cpuTime()
	if f.stats != nil {
		st, e := f.prog.Stats()
		if e == nil {
			p.bpfTime, p.bpfRuns = st.Runtime, st.RunCount
		}
		err = errors.Join(err, e)
	}
	return end, errors.Join(err, f.close())
}

func (f *floorAttach) close() error {
	var err error
	if f.lnk != nil {
		err = f.lnk.Close()
	}
	if f.rd != nil {
		err = errors.Join(err, f.rd.Close())
	}
	if f.prog != nil {
		err = errors.Join(err, f.prog.Close())
	}
	if f.records != nil {
		err = errors.Join(err, f.records.Close())
	}
	if f.stats != nil {
		err = errors.Join(err, f.stats.Close())
		f.stats = nil
	}
	return err
}
