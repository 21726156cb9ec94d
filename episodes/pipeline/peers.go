package pipeline

import (
	"bufio"
	"encoding/hex"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sigscope/sigscope/episodes/timeline"
)

// Who was hurt, named: the addresses of this node (a process on it, a
// host-network pod, traffic kube-proxy masqueraded), read from the node's
// network namespace, and the pods the agent knows (Options.PeerNames).

// nodeAddrsEvery is how long the node's addresses are kept before they
// are read again.
const nodeAddrsEvery = 30 * time.Second

// peerNames names the addresses of the clients that lost requests in
// ep's stop; nil when it has none.
func (p *Pipeline) peerNames(ep *timeline.Episode, now time.Time) map[netip.Addr]timeline.PeerName {
	addrs, at := ep.PeerAddrs()
	if len(addrs) == 0 {
		return nil
	}
	if p.nodeAddrs == nil || now.Sub(p.nodeAddrsAt) > nodeAddrsEvery {
		p.nodeAddrs, p.nodeAddrsAt = nodeAddrs(p.nodeNetPID()), now
	}
	if p.opts.PeerNames != nil {
		return p.opts.PeerNames(addrs, at, p.nodeAddrs)
	}
	out := map[netip.Addr]timeline.PeerName{}
	for _, a := range addrs {
		if p.nodeAddrs[a] {
			out[a] = timeline.PeerName{Kind: timeline.PeerNode}
		}
	}
	return out
}

// nodeNetPID is a process in the node's network namespace: the kubelet's
// (the agent runs in a pod of its own namespace), else this process (the
// command line, on the node).
func (p *Pipeline) nodeNetPID() string {
	if len(p.probers) > 0 {
		return strconv.Itoa(int(p.probers[0]))
	}
	return "self"
}

// nodeAddrs reads the addresses of pid's network namespace, loopback
// left out: IPv4 from the kernel's local routes (/proc/PID/net/fib_trie),
// IPv6 from /proc/PID/net/if_inet6. Empty when neither can be read.
func nodeAddrs(pid string) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	dir := filepath.Join("/proc", pid, "net")
	if f, err := os.Open(filepath.Join(dir, "fib_trie")); err == nil {
		localRoutes(f, out)
		f.Close()
	}
	if f, err := os.Open(filepath.Join(dir, "if_inet6")); err == nil {
		inet6Addrs(f, out)
		f.Close()
	}
	return out
}

// localRoutes adds the IPv4 addresses of fib_trie's local routes ("/32
// host LOCAL" under the address's leaf), loopback left out.
func localRoutes(r io.Reader, out map[netip.Addr]bool) {
	var last netip.Addr
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if a, ok := strings.CutPrefix(line, "|-- "); ok {
			last, _ = netip.ParseAddr(a)
		} else if strings.HasPrefix(line, "/32 host LOCAL") && last.IsValid() && !last.IsLoopback() {
			out[last] = true
		}
	}
}

// inet6Addrs adds if_inet6's addresses (the first field, 32 hex digits),
// loopback left out.
func inet6Addrs(r io.Reader, out map[netip.Addr]bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		b, err := hex.DecodeString(fields[0])
		if err != nil || len(b) != 16 {
			continue
		}
		if a := netip.AddrFrom16([16]byte(b)); !a.IsLoopback() {
			out[a] = true
		}
	}
}
