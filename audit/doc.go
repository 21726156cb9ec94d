// Package audit predicts, before any stop, how each running container will
// react to its stop signal: it reads what the container's PID 1 does with
// that signal (caught, ignored, blocked) from /proc and applies the kernel's
// rule for namespace inits: a signal with no handler is dropped.
//
// It owns the prediction and its hint; container listing and /proc parsing
// come from package container, and the outcome words are the timeline's.
package audit
