package tracer

// The kernel's signal.flags bits the rules read (include/linux/sched/signal.h).
const (
	signalGroupExit  = 0x4  // SIGNAL_GROUP_EXIT: the process is dying
	signalUnkillable = 0x40 // SIGNAL_UNKILLABLE: a pid-namespace init (wiped by a group exit)
)

// The raw facts BPF records (enum fact in bpf/sigscope.h).
const (
	factInfoPriv         = uint32(sigscopeFactFACT_INFO_PRIV)
	factSenderExiting    = uint32(sigscopeFactFACT_SENDER_EXITING)
	factSenderReaper     = uint32(sigscopeFactFACT_SENDER_REAPER)
	factTargetInSenderNS = uint32(sigscopeFactFACT_TARGET_IN_SENDER_NS)
	factSenderInTargetNS = uint32(sigscopeFactFACT_SENDER_IN_TARGET_NS)
	factTargetNSInit     = uint32(sigscopeFactFACT_TARGET_NS_INIT)
	factBlocked          = uint32(sigscopeFactFACT_BLOCKED)
)

// Classify computes the verdict flags of a decoded event from the raw facts
// the kernel recorded. It is the only place these rules live; docs/kernel.md
// explains each one.
func Classify(e *Event) Flags {
	var f Flags
	if e.Facts&factTargetNSInit != 0 {
		f |= FlagNSInit
	}
	switch e.Kind {
	case KindGenerate:
		f |= classifyGenerate(e)
	case KindDeliver:
		f |= classifyDeliver(e)
	}
	return f
}

func classifyGenerate(e *Event) Flags {
	var f Flags
	if e.Facts&factSenderInTargetNS == 0 {
		f |= FlagCrossNS
	}
	if e.Facts&factBlocked != 0 {
		f |= FlagBlocked
	}
	if e.Result == ResultIgnored {
		// prepare_signal's order (kernel/signal.c). From 6.0 a dying target
		// drops everything first; SIGNAL_GROUP_EXIT also wipes UNKILLABLE, so
		// the init checks below cannot fire for a dying init.
		switch {
		case e.SigFlags&signalGroupExit != 0:
			f |= FlagTargetExiting
		case e.Handler == DispIgnore:
			f |= FlagSigIgn
		case e.Handler == DispDefault && !defaultIgnored(e.Signal) && e.SigFlags&signalUnkillable != 0:
			f |= FlagPID1Ignored
		}
	}
	// zap_pid_ns_processes: group_send_sig_info(SIGKILL, SEND_SIG_PRIV, t,
	// PIDTYPE_MAX) from the namespace's reaper while it exits, to each process
	// of its namespace but its own threads.
	if e.Signal == SIGKILL && e.Group &&
		e.Facts&factInfoPriv != 0 &&
		e.Facts&factSenderExiting != 0 &&
		e.Facts&factSenderReaper != 0 &&
		e.Facts&factTargetInSenderNS != 0 &&
		e.Target.PID != e.Sender.PID {
		f |= FlagNSCascade
	}
	return f
}

// classifyDeliver catches the drop that happens after queueing: a namespace
// init that had the signal blocked at generation dequeues it with SIG_DFL,
// and get_signal() discards it for an UNKILLABLE task unless it is SIGKILL or
// SIGSTOP.
func classifyDeliver(e *Event) Flags {
	switch {
	case e.Handler == DispIgnore:
		return FlagSigIgn
	case e.Handler == DispDefault && !defaultIgnored(e.Signal) &&
		e.Signal != SIGKILL && e.Signal != SIGSTOP &&
		e.SigFlags&signalUnkillable != 0:
		return FlagPID1Ignored
	}
	return 0
}
