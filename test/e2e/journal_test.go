package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/testutil"
)

// journalAgent is a `sigscope serve --journal-dir` the test stops itself.
type journalAgent struct {
	cmd    *exec.Cmd
	base   string
	stderr *bytes.Buffer
}

func startJournalAgent(t *testing.T, dir string) *journalAgent {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(sigscope(t), "serve", "--web.listen-address", fmt.Sprintf("127.0.0.1:%d", port),
		"--journal-dir", dir, "--node-name", "e2e-node", "--log-level", "info")
	a := &journalAgent{cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", port), stderr: new(bytes.Buffer)}
	cmd.Stderr = a.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	testutil.WaitPrograms(t, cmd.Process.Pid, 5)
	waitHTTP(t, a.base+"/readyz")
	return a
}

// stop ends the agent with sig and waits for it.
func (a *journalAgent) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := a.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	err := a.cmd.Wait()
	if sig == syscall.SIGTERM && err != nil {
		t.Fatalf("the agent's exit on SIGTERM: %v\n%s", err, tail(a.stderr.String()))
	}
}

// episodes returns the raw objects /api/v1/episodes serves for a container.
func (a *journalAgent) episodes(t *testing.T, containerID string) []json.RawMessage {
	t.Helper()
	body, err := get(context.Background(), http.DefaultClient, a.base+"/api/v1/episodes?container="+containerID)
	if err != nil {
		t.Fatal(err)
	}
	var eps []json.RawMessage
	if err := json.Unmarshal(body, &eps); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return eps
}

// waitEpisode waits until the agent serves one episode of the container.
func (a *journalAgent) waitEpisode(t *testing.T, containerID string) json.RawMessage {
	t.Helper()
	var eps []json.RawMessage
	testutil.Poll(200*time.Millisecond, func() bool { eps = a.episodes(t, containerID); return len(eps) > 0 })
	if len(eps) != 1 {
		t.Fatalf("%d episodes of %s served, want 1\n%s", len(eps), containerID[:12], tail(a.stderr.String()))
	}
	return eps[0]
}

func episodeID(t *testing.T, raw json.RawMessage) uint64 {
	t.Helper()
	var ep struct {
		ID      uint64 `json:"id"`
		Outcome string `json:"outcome"`
	}
	if err := json.Unmarshal(raw, &ep); err != nil || ep.ID == 0 || ep.Outcome != "ignored_by_init" {
		t.Fatalf("episode %s: id %d, outcome %q (%v); want an id and ignored_by_init", raw, ep.ID, ep.Outcome, err)
	}
	return ep.ID
}

// The node journal outlives the agent: a real `docker stop` of a
// shell-form container makes an episode; after a SIGTERM and a restart on
// the same --journal-dir the agent serves it byte for byte with the same
// id, and numbers its next episode after it; after a SIGKILL (no flush, no
// close) and a restart, both are still served, unchanged.
func TestJournalSurvivesRestarts(t *testing.T) {
	img := busyboxImage(t)
	dir := t.TempDir()
	stopOne := func(name string) string {
		id := runContainer(t, name, img, "sh", "-c", "sleep 1000 & wait")
		docker(t, "stop", "-t", "1", name)
		return id
	}

	first := startJournalAgent(t, dir)
	c1 := stopOne("e2e-journal-1")
	ep1 := first.waitEpisode(t, c1)
	id1 := episodeID(t, ep1)
	first.stop(t, syscall.SIGTERM)

	second := startJournalAgent(t, dir)
	if got := second.episodes(t, c1); len(got) != 1 || !bytes.Equal(got[0], ep1) {
		t.Fatalf("after SIGTERM and a restart, the episode of %s is served as\n%s\nwant\n%s\n%s", c1[:12], got, ep1, tail(second.stderr.String()))
	}
	c2 := stopOne("e2e-journal-2")
	ep2 := second.waitEpisode(t, c2)
	if id2 := episodeID(t, ep2); id2 <= id1 {
		t.Errorf("the restarted agent numbered its first episode %d, after %d from before the restart", id2, id1)
	}
	// The line is written (the writer is asynchronous) before the kill.
	if !testutil.Poll(50*time.Millisecond, func() bool {
		return sumMetric(mustScrape(t, second.base), "sigscope_journal_episodes_total", nil) >= 1
	}) {
		t.Fatal("the restarted agent wrote no episode to its journal")
	}
	second.stop(t, syscall.SIGKILL)

	third := startJournalAgent(t, dir)
	for _, c := range []struct {
		id   string
		want json.RawMessage
	}{{c1, ep1}, {c2, ep2}} {
		if got := third.episodes(t, c.id); len(got) != 1 || !bytes.Equal(got[0], c.want) {
			t.Errorf("after SIGKILL and a restart, the episode of %s is served as\n%s\nwant\n%s", c.id[:12], got, c.want)
		}
	}
	if !strings.Contains(third.stderr.String(), "journal read") {
		t.Errorf("the agent did not log its journal's reading:\n%s", tail(third.stderr.String()))
	}
	third.stop(t, syscall.SIGTERM)
}
