package main

import (
	"fmt"
	"io"
	"runtime"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"
)

// report is everything one run measured.
type report struct {
	o              options
	started        time.Time
	notes          []string
	phases         []phase
	drops          *dropsResult
	serveStorm     *serveStormResult
	idle           *idleResult
	traceLat       []time.Duration
	episodeLat     []time.Duration
	episodeMissing int
	conns          *connsResult
}

const mib = 1 << 20

func (rep report) print(w io.Writer) verdicts {
	o := rep.o
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	pin := "not pinned"
	if o.senderCPU >= 0 {
		pin = fmt.Sprintf("sender on CPU %d, readers on CPU %d", o.senderCPU, o.readerCPU)
	}
	fmt.Fprintf(w, "sigscope bench, %s: kernel %s, %d CPUs, %s; ring %d bytes\n",
		rep.started.UTC().Format(time.RFC3339), unix.ByteSliceToString(uts.Release[:]), runtime.NumCPU(), pin, o.ringSize)
	for _, n := range rep.notes {
		fmt.Fprintln(w, "note:", n)
	}
	f := figures{}
	var sums map[config]cfgSummary

	if len(rep.phases) > 0 {
		fmt.Fprintf(w, "\n== storm: %d rounds x %v per phase, in run order ==\n", o.rounds, o.phase)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "round\tconfig\tsent\tns/kill\tadded ns\tsender on CPU\tread\tdropped\treader CPU\t")
		for i, p := range rep.phases {
			added := "-"
			if a, ok := addedNS(rep.phases, i); ok {
				added = fmt.Sprintf("%+.0f", a)
			}
			read, dropped := p.cfg.counters(p.read, p.dropped)
			fmt.Fprintf(tw, "%d\t%s\t%d\t%.0f\t%s\t%.1f%%\t%s\t%s\t%v\t\n", p.round, p.cfg, p.storm.sent, 1e9/p.storm.rate(),
				added, 100*p.storm.busy(), read, dropped, p.cpu.Round(time.Millisecond))
		}
		tw.Flush()

		var untraced float64
		untraced, sums = summarizeStorm(rep.phases)
		fmt.Fprintf(w, "\n== storm: per configuration (medians; added ns: each phase against the mean of the untraced phases beside it) ==\n")
		fmt.Fprintf(w, "untraced kill(2): %.0f ns\n", untraced)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "configuration\tphases\tns/kill\tadded ns\tread\tdropped\treader ms/100k\t")
		for _, c := range allConfigs {
			s, ok := sums[c]
			if !ok {
				continue
			}
			read, dropped := c.counters(s.read, s.dropped)
			per := "-"
			if read != "-" {
				per = fmt.Sprintf("%.1f", s.readerMsPer100k())
			}
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%+.0f\t%s\t%s\t%s\t\n", c.label(), s.phases, 1e9/s.rate, s.addedNS, read, dropped, per)
		}
		tw.Flush()
		for _, p := range rep.phases {
			if p.bpfRuns > 0 {
				fmt.Fprintf(w, "round %d %s: %s ran %.0f ns per invocation (%d runs, BPF_ENABLE_STATS)\n",
					p.round, p.cfg, p.cfg.progName(), float64(p.bpfTime.Nanoseconds())/float64(p.bpfRuns), p.bpfRuns)
			}
		}
		stormFigures(sums, f)
		if s, ok := sums[jsonOut]; ok && s.read > 0 {
			f[figJSONReaderMs] = s.readerMsPer100k()
			if s.rate > 0 {
				f[figJSONKeepup] = jsonKeepup(s.readerMsPer100k(), 1e9/s.rate)
			}
		}
	}

	if r := rep.conns; r != nil {
		fmt.Fprintf(w, "\n== connection storm: loopback connect, accept, close (RST), in a network namespace of its own ==\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "config\tconnections\tns/connection\tprogram runs\tns/run\tcounted (watched)")
		for _, p := range r.phases {
			counted := ""
			if p.cfg == connWatched {
				counted = fmt.Sprintf("accepted %d, reset by the client %d", p.accepted, p.resetReceived)
			}
			runs, perRun := "-", "-"
			if ns, ok := p.runNS(); ok {
				runs, perRun = fmt.Sprint(p.runs), fmt.Sprintf("%.1f", ns)
			}
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%s\n", connConfigNames[p.cfg], p.conns, p.nsPerConn(), runs, perRun, counted)
		}
		tw.Flush()
		if r.sees {
			fmt.Fprintf(w, "refused flood: %d attempts at a closed port of a watched namespace, %d counted refused; meanwhile the ring took %d records (the node's signals) and lost %d\n",
				r.flood, r.refused, r.floodRecords, r.floodDropped)
		} else if n := connsNote(r); n != "" {
			fmt.Fprintln(w, n)
		}
		connFigures(r, f)
	}

	if d := rep.drops; d != nil {
		fmt.Fprintf(w, "\n== drops: %v storm through `sigscope trace -o json > /dev/null`, %d-byte ring ==\n", d.storm.elapsed.Round(time.Second), o.ringSize)
		fmt.Fprintf(w, "sent %d (%.0f ns per kill(2), sender on CPU %.1f%%), read %d, dropped %d; trace CPU %v (%.2f cores), %.1f ms per 100k events\n",
			d.storm.sent, 1e9/d.storm.rate(), 100*d.storm.busy(), d.read, d.lost, d.cpu.Round(time.Millisecond),
			d.cpu.Seconds()/d.storm.elapsed.Seconds(), ms(d.cpu)/float64(max(d.read, 1))*1e5)
		f[figDropped] = float64(d.lost)
		if _, ok := f[figJSONReaderMs]; !ok && d.read > 0 {
			f[figJSONReaderMs] = ms(d.cpu) / float64(d.read) * 1e5
			if d.storm.sent > 0 {
				f[figJSONKeepup] = jsonKeepup(f[figJSONReaderMs], 1e9/d.storm.rate())
			}
		}
	}

	if r := rep.serveStorm; r != nil {
		r.print(w, f)
	}

	if r := rep.idle; r != nil {
		fmt.Fprintf(w, "\n== idle: `sigscope serve` watched for %v ==\n", r.dur.Round(time.Second))
		fmt.Fprintf(w, "CPU %v (%.3f%% of a core); VmRSS %.1f MiB (anonymous %.1f, file and shared %.1f; VmHWM %.1f); %d threads; binary %.1f MiB\n",
			r.cpu, r.cpuPct(), float64(r.mem.rss)/mib, float64(r.mem.anon)/mib, float64(r.mem.file)/mib, float64(r.mem.hwm)/mib,
			r.mem.threads, float64(r.binBytes)/mib)
		f[figIdleCPU] = r.cpuPct()
		f[figIdleRSS] = float64(r.mem.rss) / mib
		f[figBinary] = float64(r.binBytes) / mib
	}

	if len(rep.traceLat) > 0 || len(rep.episodeLat) > 0 {
		fmt.Fprintln(w, "\n== latency (nearest-rank percentiles) ==")
		if l := rep.traceLat; len(l) > 0 {
			fmt.Fprintf(w, "signal -> `trace -o json` line: p50 %.2f ms, p99 %.2f ms, max %.2f ms (%d samples)\n",
				ms(percentile(l, 50)), ms(percentile(l, 99)), ms(percentile(l, 100)), len(l))
			f[figTraceLatency] = ms(percentile(l, 99))
		}
		if l := rep.episodeLat; len(l) > 0 {
			fmt.Fprintf(w, "exit -> /api/v1/episodes: p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d samples, %d never seen, counted as the 10 s timeout)\n",
				ms(percentile(l, 50)), ms(percentile(l, 99)), ms(percentile(l, 100)), len(l), rep.episodeMissing)
			f[figEpisodeLatency] = ms(percentile(l, 99))
		}
	}

	fmt.Fprintln(w)
	writeResults(w, f)
	v := judge(f, sums)
	for _, l := range v.lines {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintf(w, "%d of %d targets met (%v)\n", v.passed, v.passed+v.failed, time.Since(rep.started).Round(time.Second))
	return v
}

// counters formats a configuration's read and dropped counts, "-" where
// it has none: nothing reads (0) or (a), and bpftrace's output, lost-event
// reports included, goes to /dev/null.
func (c config) counters(read, dropped uint64) (string, string) {
	r, d := "-", "-"
	switch c {
	case empty, stamped, emitted, jsonOut:
		r, d = fmt.Sprint(read), fmt.Sprint(dropped)
	case filtered:
		d = fmt.Sprint(dropped)
	}
	return r, d
}
