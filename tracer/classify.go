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
	factSigwaited        = uint32(sigscopeFactFACT_SIGWAITED)
	factInfoNoinfo       = uint32(sigscopeFactFACT_INFO_NOINFO)
	factTargetGone       = uint32(sigscopeFactFACT_TARGET_GONE)
)

// Classify computes an event's fate (fate.go) and its verdict flags from
// the raw facts the kernel recorded. It is the only place these rules live;
// docs/kernel.md explains each one.
func Classify(e *Event) Flags {
	var f Flags
	if e.Facts&factTargetNSInit != 0 {
		f |= FlagNSInit
	}
	switch e.Kind {
	case KindGenerate:
		e.Fate = generateFate(e)
		f |= classifyGenerate(e)
	case KindDeliver:
		e.Fate = deliverFate(e)
	default:
		e.Fate = FateUnknown
	}
	return f | fateFlags(e.Fate)
}

// fateFlags are the flag words that name a drop.
func fateFlags(fate Fate) Flags {
	switch fate {
	case FateDroppedInit:
		return FlagPID1Ignored
	case FateDroppedSigIgn:
		return FlagSigIgn
	case FateDroppedExiting:
		return FlagTargetExiting
	}
	return 0
}

// fateFromFlags recovers the fate of an event recorded before the fate was
// written to recordings: from its drop flags, result and handler.
func fateFromFlags(e *Event) Fate {
	switch {
	case e.Kind != KindGenerate && e.Kind != KindDeliver:
		return FateUnknown
	case e.Flags.Has(FlagPID1Ignored):
		return FateDroppedInit
	case e.Flags.Has(FlagSigIgn):
		return FateDroppedSigIgn
	case e.Flags.Has(FlagTargetExiting):
		return FateDroppedExiting
	case e.Kind == KindGenerate && e.Result == ResultIgnored:
		return FateDroppedDefault
	case e.Kind == KindGenerate && e.Result == ResultAlreadyPending:
		return FateAlreadyPending
	case e.Flags.Has(FlagBlocked):
		return FateBlocked
	case e.Handler == DispHandler && e.Signal != SIGKILL && e.Signal != SIGSTOP:
		return FateHandler
	}
	return FateDefault
}

func classifyGenerate(e *Event) Flags {
	var f Flags
	if e.Facts&factSenderInTargetNS == 0 {
		f |= FlagCrossNS
	}
	if e.Facts&factBlocked != 0 {
		f |= FlagBlocked
	}
	if e.Facts&factSigwaited != 0 {
		f |= FlagSigwaited
	}
	if e.Facts&factTargetGone != 0 {
		f |= FlagTargetGone
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
	// cgroup.kill (kernel/cgroup/cgroup.c, __cgroup_kill): send_sig(SIGKILL,
	// task, 0) to each process of the cgroup on behalf of the task that
	// wrote the file. Nothing else sends a thread-directed SIGKILL with
	// SEND_SIG_NOINFO: kill(2) passes a siginfo, tgkill is SI_TKILL.
	if e.Signal == SIGKILL && !e.Group && e.Facts&factInfoNoinfo != 0 {
		f |= FlagCgroupKill
	}
	return f
}
