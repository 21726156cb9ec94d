package sigvocab

// TaskSnapshot is a process's signal state as the kernel holds it, read by
// the task iterator (bpf/taskstate.bpf.c) from its thread-group leader: the
// task a process-directed kill(pid) is checked against. Every mask has bit
// n-1 for signal n.
type TaskSnapshot struct {
	PID         int    // host pid
	NSPID       int    // pid in its own pid namespace (1: a namespace init)
	PidNS       uint32 // inode of that pid namespace (/proc/PID/ns/pid)
	Comm        Comm
	SigFlags    uint32    // signal->flags
	Blocked     SignalSet // task->blocked
	RealBlocked SignalSet // task->real_blocked: the mask before sigtimedwait(), empty outside it
	Handled     SignalSet // a user handler is installed
	Ignored     SignalSet // SIG_IGN is installed
	// OneShot is the set whose user handler has SA_RESETHAND: the kernel
	// resets the disposition to SIG_DFL as it delivers the signal, so a
	// handler that re-raises it (Node.js's for SIGTERM and SIGINT) gets the
	// default action, which a namespace init never takes. A subset of
	// Handled.
	OneShot SignalSet
}

// NSInit reports whether the process is the init of a pid namespace
// (SIGNAL_UNKILLABLE; a group exit wipes it).
func (s TaskSnapshot) NSInit() bool { return s.SigFlags&SignalUnkillable != 0 }

// Exiting reports whether the process is dying (SIGNAL_GROUP_EXIT).
func (s TaskSnapshot) Exiting() bool { return s.SigFlags&SignalGroupExit != 0 }

// Waited is the set the process sleeps in sigtimedwait() or sigwaitinfo()
// for: do_sigtimedwait() saved blocked in real_blocked and removed the
// waited set from blocked. /proc/PID/status cannot show it.
func (s TaskSnapshot) Waited() SignalSet { return s.RealBlocked &^ s.Blocked }

// State is what prepare_signal() would decide sig with, for [PredictFate].
func (s TaskSnapshot) State(sig Signal) TaskState {
	st := TaskState{
		Blocked: s.Blocked.Has(sig),
		Waited:  s.Waited().Has(sig),
		NSInit:  s.NSInit(),
		Exiting: s.Exiting(),
	}
	switch {
	case s.Handled.Has(sig):
		st.Handler = DispHandler
		st.OneShot = s.OneShot.Has(sig)
	case s.Ignored.Has(sig):
		st.Handler = DispIgnore
	}
	return st
}
