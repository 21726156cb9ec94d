package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// genProgName is the tracer's signal_generate program, as the kernel names
// it (BPF_OBJ_NAME_LEN keeps 15 characters).
const genProgName = "handle_generate"

// progRunStats measures how long programs run per invocation, from the
// kernel's own counters (BPF_ENABLE_STATS): the tracer's signal_generate
// program, or the connection storm's three TCP programs. The tracer does
// not expose its programs, so they are found by ID and name among those
// loaded after start. Counting costs two clock
// reads per run, so it is opt-in (-bpf-stats) and inflates the traced phases
// it is enabled in.
type progRunStats struct {
	enabled io.Closer
	after   ebpf.ProgramID
	progs   []*ebpf.Program
}

// startProgRunStats enables run-time statistics; call it before tracer.New.
func startProgRunStats() (*progRunStats, error) {
	c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return nil, fmt.Errorf("enabling BPF run-time statistics: %w", err)
	}
	s := &progRunStats{enabled: c}
	for {
		next, err := ebpf.ProgramGetNextID(s.after)
		if errors.Is(err, os.ErrNotExist) {
			return s, nil
		}
		if err != nil {
			s.close()
			return nil, fmt.Errorf("listing BPF programs: %w", err)
		}
		s.after = next
	}
}

// attach finds the tracer's signal_generate program among those loaded
// since start; call it after tracer.New.
func (s *progRunStats) attach() error {
	if err := s.attachNamed(genProgName); err != nil {
		return err
	}
	if len(s.progs) != 1 {
		return fmt.Errorf("found %d %s programs loaded by the tracer, want 1 (is another tracer loading now?)", len(s.progs), genProgName)
	}
	return nil
}

// attachNamed finds the programs with these names among those loaded since
// start; at least one must be there.
func (s *progRunStats) attachNamed(names ...string) error {
	for id := s.after; ; {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			return fmt.Errorf("listing BPF programs: %w", err)
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // unloaded meanwhile
		}
		if info, err := p.Info(); err == nil && slices.ContainsFunc(names, func(n string) bool { return progNamed(info.Name, n) }) {
			s.progs = append(s.progs, p)
			continue
		}
		p.Close()
	}
	if len(s.progs) == 0 {
		return fmt.Errorf("found none of the programs %q loaded since the statistics began", names)
	}
	return nil
}

// read returns the total run time and run count so far.
func (s *progRunStats) read() (time.Duration, uint64, error) {
	var rt time.Duration
	var n uint64
	for _, p := range s.progs {
		st, err := p.Stats()
		if err != nil {
			return 0, 0, fmt.Errorf("reading a program's run-time statistics: %w", err)
		}
		rt += st.Runtime
		n += st.RunCount
	}
	return rt, n, nil
}

func (s *progRunStats) close() {
	for _, p := range s.progs {
		p.Close()
	}
	s.enabled.Close()
}

// progNamed reports whether a loaded program's name is the function name:
// the kernel keeps 15 characters (BPF_OBJ_NAME_LEN), and the library gives
// the whole name back when the program's BTF has it.
func progNamed(loaded, fn string) bool {
	return loaded == fn || len(loaded) == 15 && strings.HasPrefix(fn, loaded)
}
