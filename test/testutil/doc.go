// Package testutil holds helpers shared by sigscope's tests: the rule for
// privileged tests (skip with a message when not root, fail instead when
// SIGSCOPE_REQUIRE_PRIVILEGED=1, as CI sets it) and process helpers that
// start real pid namespaces. Tests only; nothing in the binary imports it.
package testutil
