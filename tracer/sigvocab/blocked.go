package sigvocab

import "time"

// TaskReading is what a blocked record (KindBlocked) read of one task when a
// stop signal or SIGKILL came to its namespace's init from outside: the
// kernel writes one for the process's main thread, for a few of its other
// threads and for a few of its children (bpf/sigscope.h, struct event).
type TaskReading struct {
	Role    TaskRole
	Process uint32 // host pid of the signalled process (the init)
	// Syscall is the system call the task was in, or had last entered
	// (x86_64 numbers; -1: it had entered the kernel otherwise, an
	// interrupt): a task that used no CPU time since the stop signal sleeps
	// in it. Arg is its first argument, FdKind the kind of file that is
	// when the call reads from an fd (FdPipe, FdSocket, ...; 0 unknown).
	Syscall int32
	Arg     uint64
	FdKind  FdKind
	// CPUNs is the CPU time the task had used, in ns: its growth from the
	// stop signal's reading to the SIGKILL's is the progress it made.
	CPUNs uint64
	OnCPU bool // running on a CPU at that moment
	// Dispositions are a child's handling of SIGHUP, SIGINT, SIGQUIT and
	// SIGTERM, two bits each from the lowest: 0 default, 1 ignored, 2 a
	// handler. Children only.
	Dispositions uint8
	Threads      uint8 // the process's threads, up to 255 (main thread only)
	// Slot is the kernel's slot of an exec (RoleExec), and of the exec a
	// RoleExecChild is a child of: it pairs the two in one capture.
	Slot uint8
	// MoreThreads and MoreChildren: the process had threads or children
	// no record shows (a record of the main thread with only these set).
	MoreThreads, MoreChildren bool
}

// TaskRole is which task of the process a blocked record is.
type TaskRole uint8

const (
	RoleMainThread TaskRole = 0 // the process's main thread
	RoleThread     TaskRole = 1 // another of its threads
	RoleChild      TaskRole = 2 // one of its children
	// RoleExec is a process that entered the init's pid namespace from
	// outside (runc exec: a preStop exec hook, an exec probe, kubectl
	// exec) and still ran; RoleExecChild a child of one. Slot pairs them.
	RoleExec      TaskRole = 3
	RoleExecChild TaskRole = 4
)

var roleNames = [...]string{"main_thread", "thread", "child", "exec", "exec_child"}

func (r TaskRole) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return "unknown"
}

// FdKind is the file type of an fd (its inode's mode >> 12).
type FdKind uint8

const (
	FdUnknown FdKind = 0
	FdPipe    FdKind = 1
	FdChar    FdKind = 2
	FdDir     FdKind = 4
	FdBlock   FdKind = 6
	FdFile    FdKind = 8
	FdSymlink FdKind = 10
	FdSocket  FdKind = 12
)

func (k FdKind) String() string {
	switch k {
	case FdPipe:
		return "pipe"
	case FdChar:
		return "char_device"
	case FdDir:
		return "directory"
	case FdBlock:
		return "block_device"
	case FdFile:
		return "file"
	case FdSymlink:
		return "symlink"
	case FdSocket:
		return "socket"
	}
	return ""
}

// Disposition of sig (SIGHUP, SIGINT, SIGQUIT or SIGTERM) from a child's
// Dispositions; DispDefault for any other signal.
func (t *TaskReading) Disposition(sig Signal) Disposition {
	var s uint
	switch sig {
	case SIGHUP:
		s = 0
	case SIGINT:
		s = 2
	case SIGQUIT:
		s = 4
	case SIGTERM:
		s = 6
	default:
		return DispDefault
	}
	return Disposition(t.Dispositions >> s & 3)
}

// CPUSince is the CPU time the task used since an earlier reading of it
// (that reading's CPUNs); false when that reading shows more, as one of
// another task that had the same TID would.
func (t *TaskReading) CPUSince(was uint64) (time.Duration, bool) {
	if t.CPUNs < was {
		return 0, false
	}
	return time.Duration(t.CPUNs - was), true
}
