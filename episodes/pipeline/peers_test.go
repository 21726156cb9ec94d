package pipeline

import (
	"net/netip"
	"strings"
	"testing"
)

// This node's addresses, from the kernel's local routes and IPv6 list:
// loopback and the routes to networks left out.
func TestNodeAddrs(t *testing.T) {
	fib := `Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 10.88.0.0/16 2 0 2
        |-- 10.88.0.0
           /16 link UNICAST
        |-- 10.88.0.1
           /32 host LOCAL
     |-- 127.0.0.1
        /32 host LOCAL
Local:
  +-- 0.0.0.0/0 3 0 5
     |-- 192.168.5.20
        /32 host LOCAL
     |-- 192.168.5.255
        /32 link BROADCAST
`
	inet6 := "00000000000000000000000000000001 01 80 10 80       lo\nfd000000000000000000000000000007 02 40 00 80     eth0\n"
	got := map[netip.Addr]bool{}
	localRoutes(strings.NewReader(fib), got)
	inet6Addrs(strings.NewReader(inet6), got)
	want := []string{"10.88.0.1", "192.168.5.20", "fd00::7"}
	if len(got) != len(want) {
		t.Errorf("addresses %v, want %v", got, want)
	}
	for _, w := range want {
		if !got[netip.MustParseAddr(w)] {
			t.Errorf("%s missing from %v", w, got)
		}
	}
	// This machine's own: at least one besides loopback.
	if len(nodeAddrs("self")) == 0 {
		t.Errorf("no address read from /proc/self/net")
	}
}
