package main

import (
	"context"
	"errors"
	"time"

	"github.com/sigscope/sigscope/tracer"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// tracerAttach is (a) or (b): sigscope's tracer in this process, its Run
// callback only counting (nothing allocates, the *Event is reused), so that
// what is measured is the tracer and not what a consumer does with events.
type tracerAttach struct {
	tr      *tracer.Tracer
	cancel  context.CancelFunc
	done    chan error
	counted uint64
	stats   *progRunStats
}

func attachTracer(c config, ringSize int, bpfStats bool) (*tracerAttach, error) {
	// (a) traces SIGTERM only: the storm's SIGUSR1 is dropped by the
	// signal-mask test, the first thing the program does.
	set := sigvocab.NewSignalSet(sigvocab.SIGUSR1)
	if c == filtered {
		set = sigvocab.NewSignalSet(sigvocab.SIGTERM)
	}
	t := &tracerAttach{done: make(chan error, 1)}
	if bpfStats {
		var err error
		if t.stats, err = startProgRunStats(); err != nil {
			return nil, err
		}
	}
	tr, err := tracer.New(tracer.Options{Signals: set, RingSize: ringSize})
	if err != nil {
		t.closeStats()
		return nil, err
	}
	t.tr = tr
	if t.stats != nil {
		if err := t.stats.attach(); err != nil {
			t.closeStats()
			return nil, errors.Join(err, tr.Close())
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	go func() {
		t.done <- tr.Run(ctx, func(*sigvocab.Event) error {
			t.counted++
			return nil
		})
	}()
	return t, nil
}

func (t *tracerAttach) cpu() (time.Duration, error) { return cpuTime(), nil }

// stop cancels Run, which detaches, drains what the kernel wrote and
// returns; the counters are final after Close.
func (t *tracerAttach) stop(p *phase) (time.Duration, error) {
	t.cancel()
	err := <-t.done
	end := cpuTime()
	err = errors.Join(err, t.tr.Close())
	defer t.closeStats()
	if t.stats != nil {
		var e error
		p.bpfTime, p.bpfRuns, e = t.stats.read()
		err = errors.Join(err, e)
	}
	s, e := t.tr.Stats()
	if e != nil {
		return end, errors.Join(err, e)
	}
	p.read, p.dropped = s.Read, s.Total().Dropped
	if err == nil && (s.Read != t.counted || s.DecodeErrors > 0) {
		// An invariant of the tracer, not a performance figure.
		err = errors.New("accounting: the callback did not see every record read, or some did not decode")
	}
	return end, err
}

func (t *tracerAttach) closeStats() {
	if t.stats != nil {
		t.stats.close()
		t.stats = nil
	}
}
