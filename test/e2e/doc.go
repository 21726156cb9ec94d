// Package e2e holds sigscope's end-to-end tests: the real sigscope binary,
// the real kernel and a real Docker engine (installed and started by
// test/dockertest when missing; containerd's CRI and CRI-O by
// test/critest), driven by real docker stop, docker kill and docker rm
// -f, and faults (faults_test.go: a ring buffer too small for a
// burst, dockerd stopped and crashed under the agent, the agent SIGKILLed in
// the middle of a stop). It has no code outside its tests.
package e2e
