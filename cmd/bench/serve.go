package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// serveStormResult is `sigscope serve` (default signals, so the storm's
// SIGUSR1 is counted, resolved and fed to the episode engine; /metrics
// scraped every second) under the one-core storm: does the agent keep
// every event, and what does one cost it?
type serveStormResult struct {
	storm   storm
	events  float64       // generate events the agent counted over the storm (sigscope_signals_total)
	dropped float64       // records the kernel could not reserve (sigscope_events_dropped_total)
	missed  float64       // program runs the kernel skipped (sigscope_events_missed_total)
	cpu     time.Duration // the agent's CPU from the storm's start until it had counted every event
	drain   time.Duration // from the storm's end until then
	mem     procMem       // at the end; VmHWM is the storm's peak when resetHWM worked
	hwmNote string        // why VmHWM may include the agent's start-up, "" when it does not
	scrapes int
}

// serve_ms_per_100k: the agent's CPU per 100,000 events counted.
func (r serveStormResult) msPer100k() float64 {
	if r.events <= 0 {
		return 0
	}
	return ms(r.cpu) / r.events * 1e5
}

// runServeStorm starts the agent, lets it settle past its start-up, and
// storms its default signals for d. The agent inherits this process's
// CPU (-reader-cpu), as every reader does.
func runServeStorm(ctx context.Context, env stormEnv, d time.Duration) (serveStormResult, error) {
	var r serveStormResult
	o := env.o
	s, err := startServe(ctx, o.bin, o.serveArgs)
	if err != nil {
		return r, err
	}
	defer s.stop()
	// Past its start-up (BTF, the first audit, runtimes asked once), as
	// for the idle agent.
	if err := sleepCtx(ctx, 2*time.Second); err != nil {
		return r, err
	}
	// Loading BPF programs parses the kernel's BTF, a start-up peak that
	// is not the storm's: reset VmHWM (clear_refs 5), so that at the end it
	// is the peak under the storm.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", s.pid()), []byte("5"), 0); err != nil {
		r.hwmNote = fmt.Sprintf("VmHWM not reset (%v): it may be the start-up's", err)
	}
	c0, err := s.serveCounters()
	if err != nil {
		return r, err
	}
	cpu0, err := procCPU(s.pid())
	if err != nil {
		return r, err
	}

	// A scrape a second, as a busy Prometheus would, for the whole storm.
	scrapeCtx, stopScrapes := context.WithCancel(ctx)
	scrapes := make(chan int, 1)
	go func() {
		n := 0
		defer func() { scrapes <- n }()
		for sleepCtx(scrapeCtx, time.Second) == nil {
			if _, err := s.serveCounters(); err == nil {
				n++
			}
		}
	}()
	r.storm, err = runSender(ctx, env.target, d, o.senderCPU)
	stopScrapes()
	r.scrapes = <-scrapes
	if err != nil {
		return r, err
	}

	// The agent has counted every event the kernel wrote once its
	// signals equal the generate events emitted.
	end := time.Now()
	deadline := end.Add(30 * time.Second)
	var c1 serveCounters
	for {
		if c1, err = s.serveCounters(); err != nil {
			return r, err
		}
		if c1.signals-c0.signals == c1.emitted-c0.emitted {
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("the agent never caught up: %.0f generate events emitted, %.0f counted",
				c1.emitted-c0.emitted, c1.signals-c0.signals)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return r, err
		}
	}
	r.drain = time.Since(end)
	cpu1, err := procCPU(s.pid())
	if err != nil {
		return r, err
	}
	r.cpu = cpu1 - cpu0
	r.events, r.dropped, r.missed = c1.signals-c0.signals, c1.dropped-c0.dropped, c1.missed-c0.missed
	r.mem, err = readProcMem(s.pid())
	return r, err
}

// serveCounters are the agent's books, summed over their labels.
type serveCounters struct{ signals, emitted, dropped, missed float64 }

func (s *serveChild) serveCounters() (serveCounters, error) {
	resp, err := s.client.Get(s.base + "/metrics")
	if err != nil {
		return serveCounters{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return serveCounters{}, err
	}
	return parseServeCounters(body)
}

func parseServeCounters(body []byte) (serveCounters, error) {
	var c serveCounters
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return c, fmt.Errorf("the agent's /metrics: %w", err)
	}
	c.signals = sumCounter(fams["sigscope_signals_total"], "", "")
	c.emitted = sumCounter(fams["sigscope_events_total"], "event", "generate")
	c.dropped = sumCounter(fams["sigscope_events_dropped_total"], "", "")
	c.missed = sumCounter(fams["sigscope_events_missed_total"], "", "")
	if fams["sigscope_events_total"] == nil {
		return c, errors.New("the agent's /metrics has no sigscope_events_total")
	}
	return c, nil
}

// sumCounter adds a family's values, those with label=value when label is
// set.
func sumCounter(f *dto.MetricFamily, label, value string) float64 {
	if f == nil {
		return 0
	}
	var sum float64
	for _, m := range f.GetMetric() {
		if label != "" && !hasLabel(m, label, value) {
			continue
		}
		if c := m.GetCounter(); c != nil {
			sum += c.GetValue()
		} else if g := m.GetUntyped(); g != nil {
			sum += g.GetValue()
		}
	}
	return sum
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue() == value
		}
	}
	return false
}

// print writes the section and sets its figures.
func (r serveStormResult) print(w io.Writer, f figures) {
	fmt.Fprintf(w, "\n== serve: %v storm through `sigscope serve` (default signals; /metrics scraped every second) ==\n", r.storm.elapsed.Round(time.Second))
	fmt.Fprintf(w, "sent %d (%.0f ns per kill(2), sender on CPU %.1f%%), counted %.0f, dropped %.0f, missed %.0f; agent CPU %v (%.2f cores), %.1f ms per 100k events; drained %v after the storm; %d scrapes\n",
		r.storm.sent, 1e9/r.storm.rate(), 100*r.storm.busy(), r.events, r.dropped, r.missed, r.cpu.Round(time.Millisecond),
		r.cpu.Seconds()/r.storm.elapsed.Seconds(), r.msPer100k(), r.drain.Round(time.Millisecond), r.scrapes)
	fmt.Fprintf(w, "peak RSS (VmHWM over the storm) %.1f MiB; VmRSS at the end %.1f MiB (anonymous %.1f, file and shared %.1f); %d threads\n",
		float64(r.mem.hwm)/mib, float64(r.mem.rss)/mib, float64(r.mem.anon)/mib, float64(r.mem.file)/mib, r.mem.threads)
	if r.hwmNote != "" {
		fmt.Fprintln(w, "note:", r.hwmNote)
	}
	f[figServeDropped] = r.dropped
	if r.events > 0 {
		f[figServeMs] = r.msPer100k()
	}
	f[figServePeakRSS] = float64(r.mem.hwm) / mib
}

// serveStormSection runs the section when asked: a failure is the run's.
func serveStormSection(ctx context.Context, env stormEnv, rep *report) error {
	slog.Info("serve: a long storm through sigscope serve", "for", env.o.serveStorm)
	r, err := runServeStorm(ctx, env, env.o.serveStorm)
	if err != nil {
		return fmt.Errorf("serve storm: %w", err)
	}
	rep.serveStorm = &r
	return nil
}
