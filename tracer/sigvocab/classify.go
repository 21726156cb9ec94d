package sigvocab

// The kernel's signal.flags bits the rules read (include/linux/sched/signal.h),
// as [Event.SigFlags] and [TaskSnapshot.SigFlags] carry them.
const (
	SignalGroupExit  = 0x4  // SIGNAL_GROUP_EXIT: the process is dying
	SignalUnkillable = 0x40 // SIGNAL_UNKILLABLE: a pid-namespace init (wiped by a group exit)
)

// The raw facts BPF records in [Event.Facts]: enum fact in bpf/sigscope.h,
// bit for bit (tracer's vocab_test.go holds them to the bpf2go output).
const (
	FactInfoNoinfo       uint32 = 1 << 0  // info == SEND_SIG_NOINFO
	FactInfoPriv         uint32 = 1 << 1  // info == SEND_SIG_PRIV (the kernel)
	FactSenderExiting    uint32 = 1 << 2  // the sender has PF_EXITING
	FactSenderReaper     uint32 = 1 << 3  // the sender is its pid namespace's child_reaper
	FactTargetInSenderNS uint32 = 1 << 4  // the target has a pid in the sender's pid namespace
	FactSenderInTargetNS uint32 = 1 << 5  // the sender has a pid in the target's pid namespace
	FactTargetNSInit     uint32 = 1 << 6  // the target's tgid is 1 in its pid namespace
	FactBlocked          uint32 = 1 << 7  // the target blocks the signal
	FactGroupDead        uint32 = 1 << 8  // exit: the last thread of the group
	FactTargetNSChild    uint32 = 1 << 9  // the target lives in a pid namespace other than the root
	FactSigwaited        uint32 = 1 << 10 // the target waits for it: in real_blocked (sigtimedwait), not in blocked
	FactTargetGone       uint32 = 1 << 11 // every thread of the target has exited (signal->live == 0)
	FactNetWatched       uint32 = 1 << 12 // generate: the target's network namespace is in stopping_nets
	FactNetShared        uint32 = 1 << 13 // generate, exec: the target shares the network namespace of a sender (parent) outside its pid namespace
	FactMoreThreads      uint32 = 1 << 14 // blocked: the process has threads no record shows
	FactMoreChildren     uint32 = 1 << 15 // blocked: the process has children no record shows
)

// Classify computes an event's fate (fate.go) and its verdict flags from
// the raw facts the kernel recorded. It is the only place these rules live;
// docs/kernel.md explains each one.
func Classify(e *Event) Flags {
	var f Flags
	if e.Facts&FactTargetNSInit != 0 {
		f |= FlagNSInit
	}
	if e.Facts&FactNetShared != 0 && (e.Kind == KindGenerate || e.Kind == KindExec) {
		f |= FlagNetShared
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
	if e.Facts&FactSenderInTargetNS == 0 {
		f |= FlagCrossNS
	}
	if e.Facts&FactBlocked != 0 {
		f |= FlagBlocked
	}
	if e.Facts&FactSigwaited != 0 {
		f |= FlagSigwaited
	}
	if e.Facts&FactTargetGone != 0 {
		f |= FlagTargetGone
	}
	// zap_pid_ns_processes: group_send_sig_info(SIGKILL, SEND_SIG_PRIV, t,
	// PIDTYPE_MAX) from the namespace's reaper while it exits, to each process
	// of its namespace but its own threads.
	if e.Signal == SIGKILL && e.Group &&
		e.Facts&FactInfoPriv != 0 &&
		e.Facts&FactSenderExiting != 0 &&
		e.Facts&FactSenderReaper != 0 &&
		e.Facts&FactTargetInSenderNS != 0 &&
		e.Target.PID != e.Sender.PID {
		f |= FlagNSCascade
	}
	// cgroup.kill (kernel/cgroup/cgroup.c, __cgroup_kill): send_sig(SIGKILL,
	// task, 0) to each process of the cgroup on behalf of the task that
	// wrote the file. Nothing else sends a thread-directed SIGKILL with
	// SEND_SIG_NOINFO: kill(2) passes a siginfo, tgkill is SI_TKILL.
	if e.Signal == SIGKILL && !e.Group && e.Facts&FactInfoNoinfo != 0 {
		f |= FlagCgroupKill
	}
	return f
}
