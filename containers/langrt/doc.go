// Package langrt recognises the language runtime of a container's main
// process (Node.js, the Go runtime, the JVM, CPython, Ruby, Perl, a shell,
// a forwarding init) from what the kernel and /proc show, without running
// anything in the container: the command name, the executable's path and
// name, the command line, and for the Go runtime the executable's
// .go.buildinfo section.
//
// It owns the one list of what each runtime does with a stop signal when
// it runs as a namespace init, and the fix each hint names for it: the
// timeline's hints and the audit's predictions both take them from here.
//
// It does not decide outcomes (timeline) or predict stops (audit); it reads
// /proc only when asked (Detect), never per event.
package langrt
