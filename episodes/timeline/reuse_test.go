package timeline

import (
	"slices"
	"testing"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// A pid namespace inode reused while the episode of the namespace that had
// it is still settling (issue 28): a namespace made by unshare is killed,
// and a container's namespace gets its inode before the settle time ends.
// The two stops are two episodes, and the first one names no container.
func TestReusedNamespaceInode(t *testing.T) {
	old := newSim(t, nsA, 5151, "sh", nil).
		kill(0, runc).
		initExit(1*ms, sigvocab.SIGKILL, 0)
	ctr := newSim(t, nsA, 6060, "app", dockerInfo(idA, "web", 10)).
		stop(300*ms, sigvocab.SIGTERM, sigvocab.DispHandler, false).
		initExit(310*ms, 0, 3)
	in := append(slices.Clone(old.in), ctr.in...)
	done, flushed := feed(New(Options{}), in)
	all := append(done, flushed...)
	if len(all) != 2 {
		t.Fatalf("%d episodes, want 2: %+v", len(all), all)
	}
	for _, ep := range all {
		switch ep.Main.PID {
		case 5151:
			if ep.Container.ID != "" || ep.Outcome != OutcomeKilled {
				t.Errorf("the unshare namespace's episode: container %q, outcome %s; want none, killed", ep.Container.ID, ep.Outcome)
			}
		case 6060:
			if ep.Container.ID != idA || ep.Container.Name != "web" || ep.Outcome != OutcomeGraceful {
				t.Errorf("the container's episode: container %q %q, outcome %s; want %s web, graceful", ep.Container.ID, ep.Container.Name, ep.Outcome, idA)
			}
		default:
			t.Errorf("an episode of main pid %d", ep.Main.PID)
		}
	}
}
