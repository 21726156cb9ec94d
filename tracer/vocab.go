package tracer

import "github.com/sigscope/sigscope/tracer/sigvocab"

// The event vocabulary is package sigvocab's, which links no BPF loader so
// that clients that only read events (kubectl-sigscope, recordings) need
// not; this repository spells it sigvocab.X everywhere, this package
// included. sigvocab is internal, so a program outside this module could
// not name the types this package's API takes and returns: these aliases
// are for it, and are all the API needs (the types of the exported
// signatures and of their exported fields). The vocabulary's constants,
// variables and functions are not re-exported.
type (
	Ancestor     = sigvocab.Ancestor
	CodeClass    = sigvocab.CodeClass
	Comm         = sigvocab.Comm
	Disposition  = sigvocab.Disposition
	Event        = sigvocab.Event
	Fate         = sigvocab.Fate
	Flags        = sigvocab.Flags
	Kind         = sigvocab.Kind
	Process      = sigvocab.Process
	Result       = sigvocab.Result
	Signal       = sigvocab.Signal
	SignalSet    = sigvocab.SignalSet
	TaskSnapshot = sigvocab.TaskSnapshot
	TaskState    = sigvocab.TaskState
)
