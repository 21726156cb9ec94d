// Package procsig reads how a process takes signals as /proc shows it:
// the caught, ignored and blocked masks and the pid-namespace pid of
// /proc/PID/status ([ReadProcSignals]), the command line, and the signals
// its signalfds watch ([SignalfdMask]). It is the audit's fallback when the
// kernel's own task state cannot be read (tracer.ReadTaskStates), and says
// when a read needs CAP_SYS_PTRACE ([NeedsPtrace]).
//
// It is apart from package container so that the audit, which the kubectl
// plugin links, does not link the runtimes' clients. It predicts nothing:
// sigvocab turns a [ProcSignals.State] into a fate.
package procsig
