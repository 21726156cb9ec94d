package sigvocab

import "fmt"

// The words for a fate are here and nowhere else: the timeline's
// kernel_verdict steps ("kernel: ignored — PID 1 has no SIGTERM handler")
// and the audit's hints ("PID 1 (sh) has no SIGTERM handler: the kernel
// drops ...") both say what the kernel does with the stop signal in these
// words, so a recorded stop and its prediction read the same; the
// timeline's other sent signals end with ResultWords.

// Verb is the one word for what the kernel did with the signal: ignored
// (dropped), delivered (to a handler or the default action), queued
// (blocked or waited for), merged (already pending) or failed (not queued).
func (f Fate) Verb() string {
	switch {
	case f.Dropped():
		return "ignored"
	case f == FateSigwait || f == FateBlocked:
		return "queued"
	case f == FateAlreadyPending:
		return "merged"
	case f == FateFailed:
		return "failed"
	}
	return "delivered"
}

// Reason says why the kernel did what Verb says with sig at the process
// named who ("PID 1", "the main process (sleep)", "it"), whose handler is
// h: "PID 1 has no SIGTERM handler". It is "" when there is nothing to add
// (an unknown fate, or the default action of a signal that neither ends
// nor stops).
func (f Fate) Reason(sig Signal, h Disposition, who string) string {
	switch f {
	case FateDroppedInit:
		return fmt.Sprintf("%s has no %s handler", who, sig)
	case FateDroppedSigIgn:
		return fmt.Sprintf("%s has set %s to SIG_IGN", who, sig)
	case FateDroppedDefault:
		return fmt.Sprintf("the default action of %s is to do nothing", sig)
	case FateDroppedExiting:
		return fmt.Sprintf("%s is already exiting", who)
	case FateHandler:
		return fmt.Sprintf("%s has a %s handler", who, sig)
	case FateSigwait:
		return fmt.Sprintf("%s waits for %s with sigtimedwait", who, sig)
	case FateBlocked:
		if h == DispHandler {
			return fmt.Sprintf("%s has %s blocked (it has a handler)", who, sig)
		}
		return fmt.Sprintf("%s has %s blocked (and no handler)", who, sig)
	case FateAlreadyPending:
		return fmt.Sprintf("%s is already pending at %s, blocked", sig, who)
	case FateFailed:
		return fmt.Sprintf("the real-time signal queue of %s is full", who)
	case FateDefault:
		switch {
		case f.Kills(sig):
			return fmt.Sprintf("its default action ends %s", who)
		case sig.Stops():
			return fmt.Sprintf("its default action stops %s without ending it", who)
		}
	}
	return ""
}

// Explain is Verb and Reason as one phrase: "ignored — PID 1 has no
// SIGTERM handler".
func (f Fate) Explain(sig Signal, h Disposition, who string) string {
	if r := f.Reason(sig, h, who); r != "" {
		return f.Verb() + " — " + r
	}
	return f.Verb()
}

// ResultWords says, after a sentence that sends sig, what the kernel did
// with it when it did not deliver it (result r): "ignored: PID 1 has no
// handler", "ignored: SIG_IGN", "ignored: already exiting", or the result
// itself ("already_pending"); "" when it was delivered.
func (f Fate) ResultWords(r Result, sig Signal) string {
	switch {
	case r == ResultDelivered:
		return ""
	case f == FateDroppedInit && sig == SIGKILL:
		return "ignored: PID 1 cannot be killed from inside its namespace"
	case f == FateDroppedInit:
		return "ignored: PID 1 has no handler"
	case f == FateDroppedSigIgn:
		return "ignored: SIG_IGN"
	case f == FateDroppedExiting:
		return "ignored: already exiting"
	}
	return r.String()
}
