// Command sigscope traces Linux signals in the kernel: who sent which signal
// to which process, what the kernel did with it (delivered, or dropped by a
// PID 1 without a handler), and how the process ended.
//
// This package owns the command line: flags, output formats and exit codes.
// Everything it shows comes from package tracer (the kernel's records, in
// tracer/sigvocab's words).
package main
