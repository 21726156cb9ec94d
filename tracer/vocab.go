package tracer

import "github.com/sigscope/sigscope/internal/sigvocab"

// The event vocabulary is package sigvocab's, which links no BPF loader so
// that clients that only read events (kubectl-sigscope, recordings) need
// not. These names keep tracer.X working for the packages that load BPF
// anyway (the agent, the pipeline, the exporter, the command).

type (
	Ancestor    = sigvocab.Ancestor
	CodeClass   = sigvocab.CodeClass
	Comm        = sigvocab.Comm
	Disposition = sigvocab.Disposition
	Event       = sigvocab.Event
	Fate        = sigvocab.Fate
	Flags       = sigvocab.Flags
	Kind        = sigvocab.Kind

	Process      = sigvocab.Process
	Result       = sigvocab.Result
	Signal       = sigvocab.Signal
	SignalSet    = sigvocab.SignalSet
	TaskSnapshot = sigvocab.TaskSnapshot
	TaskState    = sigvocab.TaskState
)

const (
	AllSignals           = sigvocab.AllSignals
	CodeKernel           = sigvocab.CodeKernel
	CodeQueue            = sigvocab.CodeQueue
	CodeTimer            = sigvocab.CodeTimer
	CodeTkill            = sigvocab.CodeTkill
	CodeUser             = sigvocab.CodeUser
	DispDefault          = sigvocab.DispDefault
	DispHandler          = sigvocab.DispHandler
	DispIgnore           = sigvocab.DispIgnore
	FateAlreadyPending   = sigvocab.FateAlreadyPending
	FateBlocked          = sigvocab.FateBlocked
	FateDefault          = sigvocab.FateDefault
	FateDroppedDefault   = sigvocab.FateDroppedDefault
	FateDroppedExiting   = sigvocab.FateDroppedExiting
	FateDroppedInit      = sigvocab.FateDroppedInit
	FateDroppedSigIgn    = sigvocab.FateDroppedSigIgn
	FateFailed           = sigvocab.FateFailed
	FateHandler          = sigvocab.FateHandler
	FateSigwait          = sigvocab.FateSigwait
	FateUnknown          = sigvocab.FateUnknown
	FlagBlocked          = sigvocab.FlagBlocked
	FlagCgroupKill       = sigvocab.FlagCgroupKill
	FlagCrossNS          = sigvocab.FlagCrossNS
	FlagNSCascade        = sigvocab.FlagNSCascade
	FlagNSInit           = sigvocab.FlagNSInit
	FlagPID1Ignored      = sigvocab.FlagPID1Ignored
	FlagSigIgn           = sigvocab.FlagSigIgn
	FlagSigwaited        = sigvocab.FlagSigwaited
	FlagTargetExiting    = sigvocab.FlagTargetExiting
	FlagTargetGone       = sigvocab.FlagTargetGone
	KindDeliver          = sigvocab.KindDeliver
	KindExec             = sigvocab.KindExec
	KindExit             = sigvocab.KindExit
	KindGenerate         = sigvocab.KindGenerate
	KindNSEmpty          = sigvocab.KindNSEmpty
	KindOOM              = sigvocab.KindOOM
	MaxAncestors         = sigvocab.MaxAncestors
	MaxSignal            = sigvocab.MaxSignal
	ResultAlreadyPending = sigvocab.ResultAlreadyPending
	ResultDelivered      = sigvocab.ResultDelivered
	ResultIgnored        = sigvocab.ResultIgnored
	ResultLoseInfo       = sigvocab.ResultLoseInfo
	ResultOverflowFail   = sigvocab.ResultOverflowFail
	SIGALRM              = sigvocab.SIGALRM
	SIGCHLD              = sigvocab.SIGCHLD
	SIGCONT              = sigvocab.SIGCONT
	SIGHUP               = sigvocab.SIGHUP
	SIGINT               = sigvocab.SIGINT
	SIGKILL              = sigvocab.SIGKILL
	SIGPROF              = sigvocab.SIGPROF
	SIGQUIT              = sigvocab.SIGQUIT
	SIGSTOP              = sigvocab.SIGSTOP
	SIGTERM              = sigvocab.SIGTERM
	SIGURG               = sigvocab.SIGURG
	SIGUSR1              = sigvocab.SIGUSR1
	SIGUSR2              = sigvocab.SIGUSR2
	SIGVTALRM            = sigvocab.SIGVTALRM
	SIGWINCH             = sigvocab.SIGWINCH
	TimeFormat           = sigvocab.TimeFormat
)

var (
	DefaultSignals = sigvocab.DefaultSignals
	Kinds          = sigvocab.Kinds
)

// Classify is [sigvocab.Classify].
func Classify(e *Event) Flags { return sigvocab.Classify(e) }

// FlagNames is [sigvocab.FlagNames].
func FlagNames() []string { return sigvocab.FlagNames() }

// NewSignalSet is [sigvocab.NewSignalSet].
func NewSignalSet(sigs ...Signal) SignalSet { return sigvocab.NewSignalSet(sigs...) }

// ParseFate is [sigvocab.ParseFate].
func ParseFate(s string) (Fate, error) { return sigvocab.ParseFate(s) }

// ParseFlag is [sigvocab.ParseFlag].
func ParseFlag(w string) (Flags, bool) { return sigvocab.ParseFlag(w) }

// ParseSignal is [sigvocab.ParseSignal].
func ParseSignal(s string) (Signal, error) { return sigvocab.ParseSignal(s) }

// ParseSignalSet is [sigvocab.ParseSignalSet].
func ParseSignalSet(v string) (SignalSet, error) { return sigvocab.ParseSignalSet(v) }

// PredictFate is [sigvocab.PredictFate].
func PredictFate(sig Signal, st TaskState, force bool) Fate {
	return sigvocab.PredictFate(sig, st, force)
}

// The facts the tracer reads.
const (
	factInfoPriv      = sigvocab.FactInfoPriv
	factSenderExiting = sigvocab.FactSenderExiting
)
