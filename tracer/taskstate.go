package tracer

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

func snapshotOf(r *taskstateTaskState) sigvocab.TaskSnapshot {
	return sigvocab.TaskSnapshot{
		PID:         int(r.Pid),
		NSPID:       int(r.NsPid),
		PidNS:       r.Pidns,
		Comm:        comm(&r.Comm),
		SigFlags:    r.SigFlags,
		Blocked:     sigvocab.SignalSet(r.Blocked),
		RealBlocked: sigvocab.SignalSet(r.RealBlocked),
		Handled:     sigvocab.SignalSet(r.Handled),
		Ignored:     sigvocab.SignalSet(r.Ignored),
		OneShot:     sigvocab.SignalSet(r.Resethand & r.Handled), // the program reads sa_flags for every signal
	}
}

// taskStateSize is the size of one iterator record (struct task_state).
const taskStateSize = int(unsafe.Sizeof(taskstateTaskState{}))

// taskIterLoad remembers why the iterator could not be loaded, so that a
// caller that falls back to /proc (the audit, every 30 s in the agent)
// does not pay a failed load, and log it, each time.
var taskIterLoad struct {
	mu  sync.Mutex
	err error
}

// ReadTaskStates reads the signal state of each process in pids (host pids)
// from the kernel with a BPF task iterator, loaded for this call and closed
// after it: for a single audit (`sigscope audit`). A caller that audits
// again and again (the agent) keeps a [TaskIter] loaded instead. A pid that
// names no live process is absent from the map.
//
// Errors that come from the environment (no BTF, a missing capability, a
// kernel without task iterators) wrap [ErrUnsupported], say what is
// missing, and are kept: later calls return the same error at once, and the
// caller is expected to fall back to /proc.
func ReadTaskStates(pids []int) (map[int]sigvocab.TaskSnapshot, error) {
	var it TaskIter
	defer it.Close()
	return it.Read(pids)
}

// TaskIter is the task iterator, loaded at its first Read and kept until
// Close: loading it parses the kernel's BTF and verifies the program
// (milliseconds and megabytes of garbage), which an agent auditing every
// 30 s would otherwise pay each time. It grows its map of wanted pids when
// a Read asks for more than it holds. Safe for concurrent use.
type TaskIter struct {
	mu   sync.Mutex
	coll *ebpf.Collection
	it   *link.Iter
	room int      // the wanted map's size
	put  []uint32 // the pids the map holds now
	// loads counts the loads (one for many Reads).
	loads int
}

// Read is [ReadTaskStates] with the iterator kept loaded.
func (t *TaskIter) Read(pids []int) (map[int]sigvocab.TaskSnapshot, error) {
	taskIterLoad.mu.Lock()
	err := taskIterLoad.err
	taskIterLoad.mu.Unlock()
	if err != nil {
		return nil, err
	}
	want := make(map[uint32]bool, len(pids))
	for _, p := range pids {
		if p > 0 && p <= 1<<22 { // PID_MAX_LIMIT
			want[uint32(p)] = true
		}
	}
	out := make(map[int]sigvocab.TaskSnapshot, len(want))
	if len(want) == 0 {
		return out, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.coll == nil || len(want) > t.room {
		t.closeLocked()
		room := max(2*len(want), minTaskIterRoom)
		coll, it, err := loadTaskIter(room)
		if err != nil {
			taskIterLoad.mu.Lock()
			taskIterLoad.err = err
			taskIterLoad.mu.Unlock()
			return nil, err
		}
		t.coll, t.it, t.room = coll, it, room
		t.loads++
	}
	wanted := t.coll.Maps[taskstateMapWanted]
	// The map holds the last Read's pids: take out those not wanted now.
	for _, p := range t.put {
		if !want[p] {
			if err := wanted.Delete(p); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return nil, fmt.Errorf("task iterator: removing pid %d: %w", p, err)
			}
		}
	}
	t.put = t.put[:0]
	one := uint8(1)
	for p := range want {
		if err := wanted.Put(p, one); err != nil {
			return nil, fmt.Errorf("task iterator: adding pid %d: %w", p, err)
		}
		t.put = append(t.put, p)
	}
	rd, err := t.it.Open()
	if err != nil {
		return nil, fmt.Errorf("task iterator: open: %w", explainLoadError(err))
	}
	raw, err := io.ReadAll(rd)
	rd.Close()
	if err != nil {
		return nil, fmt.Errorf("task iterator: read: %w", err)
	}
	if err := decodeTaskStates(raw, out); err != nil {
		return nil, err
	}
	return out, nil
}

// minTaskIterRoom is the least room the wanted map is loaded with, so that
// a node whose containers come and go does not reload it for a few more.
const minTaskIterRoom = 256

// Close unloads the iterator; the next Read loads it again. Idempotent.
func (t *TaskIter) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closeLocked()
}

func (t *TaskIter) closeLocked() error {
	var errs []error
	if t.it != nil {
		errs = append(errs, t.it.Close())
	}
	if t.coll != nil {
		t.coll.Close()
	}
	t.coll, t.it, t.room, t.put = nil, nil, 0, nil
	return errors.Join(errs...)
}

// loadTaskIter loads the iterator with room for n pids and attaches it.
func loadTaskIter(n int) (*ebpf.Collection, *link.Iter, error) {
	if err := preflight(); err != nil {
		return nil, nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, nil, fmt.Errorf("raising RLIMIT_MEMLOCK: %w", err)
	}
	spec, err := loadTaskstate()
	if err != nil {
		return nil, nil, err
	}
	spec.Maps[taskstateMapWanted].MaxEntries = uint32(n)
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("loading the task iterator: %w", explainIterError(err))
	}
	it, err := link.AttachIter(link.IterOptions{Program: coll.Programs[taskstateProgDumpTaskState]})
	if err != nil {
		coll.Close()
		return nil, nil, fmt.Errorf("attaching the task iterator: %w", explainIterError(err))
	}
	return coll, it, nil
}

// explainIterError is explainLoadError, plus the one thing task iterators
// need that the tracer does not: Linux 5.8's iter/task.
func explainIterError(err error) error {
	err = explainLoadError(err)
	if errors.Is(err, ErrUnsupported) {
		return err
	}
	return fmt.Errorf("%w: the kernel did not load a BPF task iterator (iter/task, Linux 5.8 and later): %v", ErrUnsupported, err)
}

func decodeTaskStates(raw []byte, out map[int]sigvocab.TaskSnapshot) error {
	if len(raw)%taskStateSize != 0 {
		return fmt.Errorf("task iterator: %d bytes, not a whole number of %d-byte records", len(raw), taskStateSize)
	}
	for off := 0; off < len(raw); off += taskStateSize {
		var r taskstateTaskState
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&r)), taskStateSize), raw[off:])
		out[int(r.Pid)] = snapshotOf(&r)
	}
	return nil
}
