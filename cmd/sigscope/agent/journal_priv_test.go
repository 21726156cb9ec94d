package agent

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/exporter/journal"
	"github.com/sigscope/sigscope/test/testutil"
)

// A journal on a full disk never stops tracing: on a 64 KiB tmpfs filled
// to the last byte, the agent goes on making and serving episodes while
// every journal write fails and is counted; once space is freed the
// writes retried after their backoff put every episode in the journal.
func TestJournalOnAFullDisk(t *testing.T) {
	testutil.RequirePrivileged(t)
	dir := filepath.Join(t.TempDir(), "journal")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=64k"); err != nil {
		t.Fatalf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	filler := filepath.Join(dir, "filler")
	fill(t, filler)

	c := http.DefaultClient
	base := startAgent(t, Options{JournalDir: dir, JournalFileSize: 16 << 10, JournalFiles: 2}, "http", c)

	// Stops while the disk is full: each init exits, one episode each.
	var mine []int
	stop := func() {
		ns := testutil.StartNSInit(t, "echo ready; read x; exit 0")
		_, _ = ns.Stdin.Write([]byte("\n"))
		mine = append(mine, ns.PID)
	}
	served := func() map[int]uint64 {
		_, body := get(t, c, base+"/api/v1/episodes?outcome=exited")
		var eps []timeline.Episode
		if err := json.Unmarshal([]byte(body), &eps); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		ids := map[int]uint64{}
		for _, ep := range eps {
			if slices.Contains(mine, int(ep.Main.PID)) {
				ids[int(ep.Main.PID)] = ep.ID
			}
		}
		return ids
	}
	stop()
	stop()
	waitUntil(t, "both episodes served and journal errors counted", func() bool {
		_, m := get(t, c, base+"/metrics")
		return len(served()) == 2 && metric(t, m, "sigscope_journal_errors_total") >= 1
	})
	// Tracing went on after the first failure, and goes on still.
	stop()
	waitUntil(t, "a third episode served", func() bool { return len(served()) == 3 })
	_, m := get(t, c, base+"/metrics")
	if w := metric(t, m, "sigscope_journal_episodes_total"); w != 0 {
		t.Errorf("%v episodes written to a full disk", w)
	}
	t.Logf("full disk: journal errors %v, dropped %v", metric(t, m, "sigscope_journal_errors_total"), metric(t, m, "sigscope_journal_dropped_total"))

	// Space again: the retries write what waited.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	want := served()
	waitUntil(t, "the waiting episodes written once space was freed", func() bool {
		ld, err := journal.Load(dir, 1000)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ep := range ld.Episodes {
			if id, ok := want[int(ep.Main.PID)]; ok && id == ep.ID {
				n++
			}
		}
		return n == len(want)
	})
	if code, _ := get(t, c, base+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz %d", code)
	}
}

// fill writes path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", path, err)
			}
			break
		}
	}
	// The last page, a byte at a time.
	for {
		if _, err := f.Write(buf[:1]); err != nil {
			return
		}
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not in 90 s", what)
		}
	}
}
