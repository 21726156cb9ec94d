package testutil

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// NetPeer is a network namespace of its own, joined to a container's by a
// veth pair: a client (or a server the container calls) at an address
// other than the container's loopback, as another pod or a node would be.
// PID is a process in it (for StartHTTPLoad's netnsOf); Addr its address,
// ContainerAddr the container's end.
type NetPeer struct {
	PID                 int
	Addr, ContainerAddr string
}

// StartNetPeer makes a NetPeer for the container whose process is
// containerPID, on 10.200.subnet.0/24 (the peer .2, the container .1);
// everything goes at the test's end (the namespace with its process, the
// veth with it).
func StartNetPeer(t testing.TB, containerPID, subnet int) *NetPeer {
	t.Helper()
	ns := exec.Command("unshare", "--net", "sleep", "3600")
	if err := ns.Start(); err != nil {
		t.Fatalf("unshare --net: %v", err)
	}
	t.Cleanup(func() { ns.Process.Kill(); ns.Wait() })
	p := &NetPeer{PID: ns.Process.Pid, Addr: fmt.Sprintf("10.200.%d.2", subnet), ContainerAddr: fmt.Sprintf("10.200.%d.1", subnet)}
	// The namespace is there once unshare has exec'd sleep.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if link, err := exec.Command("readlink", fmt.Sprintf("/proc/%d/exe", p.PID)).Output(); err == nil && strings.HasSuffix(strings.TrimSpace(string(link)), "sleep") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("unshare never ran sleep")
		}
		time.Sleep(5 * time.Millisecond)
	}
	peer, ctr := fmt.Sprintf("ssp%d-%d", subnet, p.PID%10000), fmt.Sprintf("ssc%d-%d", subnet, p.PID%10000)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	in := func(pid int, args ...string) []string {
		return append([]string{"nsenter", "-t", strconv.Itoa(pid), "-n"}, args...)
	}
	run("ip", "link", "add", peer, "type", "veth", "peer", "name", ctr)
	run("ip", "link", "set", peer, "netns", strconv.Itoa(p.PID))
	run("ip", "link", "set", ctr, "netns", strconv.Itoa(containerPID))
	run(in(p.PID, "ip", "addr", "add", p.Addr+"/24", "dev", peer)...)
	run(in(p.PID, "ip", "link", "set", peer, "up")...)
	run(in(p.PID, "ip", "link", "set", "lo", "up")...)
	run(in(containerPID, "ip", "addr", "add", p.ContainerAddr+"/24", "dev", ctr)...)
	run(in(containerPID, "ip", "link", "set", ctr, "up")...)
	return p
}
