package agent

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/episodes/audit"
	"github.com/sigscope/sigscope/tracer"
)

// auditFresh is how old an audit /api/v1/audit may answer with.
const auditFresh = time.Second

// errAgentClosed answers an audit asked after the agent stopped: its
// resolver no longer asks the runtimes.
var errAgentClosed = errors.New("the agent has stopped")

// auditState is the last audit, shared by the periodic loop and the API.
type auditState struct {
	mu      sync.Mutex // held for a whole audit: concurrent requests share one
	results []audit.Result
	at      time.Time
	// closed is set, under mu, before the resolver is closed: an audit
	// that starts later (a request still in flight at shutdown) is
	// refused instead of running against a closed resolver.
	closed bool
	// iter is the task iterator, loaded at the first audit and kept
	// until the agent stops: reloading a BPF collection every
	// AuditInterval parsed the kernel's BTF each time.
	iter tracer.TaskIter
	// fallbackWarned makes the first fallback to /proc a warning and the
	// next ones, every AuditInterval, debug lines.
	fallbackWarned atomic.Bool
}

// serveAudit: GET /api/v1/audit?namespace=&pod= audits the containers
// running now (docs/api.md). Someone asked, and an audit is cheap (one
// runtime list, one task-iterator pass), but not free: requests share an
// audit at most auditFresh old, so clients polling it in a loop cost one
// audit per second, not one each. The metric is refreshed on the audit
// interval.
func (a *Agent) serveAudit(w http.ResponseWriter, r *http.Request) {
	res, err := a.currentAudit(r.Context(), auditFresh)
	if err != nil && len(res) == 0 {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	q := apiv1.ParseAuditQuery(r.URL.Query())
	out := make([]audit.Result, 0, len(res))
	for i := range res {
		c := &res[i].Container
		if q.Namespace != "" && c.Namespace != q.Namespace || q.Pod != "" && c.Pod != q.Pod {
			continue
		}
		out = append(out, res[i])
	}
	writeJSON(w, out)
}

// currentAudit returns an audit at most maxAge old, running one if needed.
func (a *Agent) currentAudit(ctx context.Context, maxAge time.Duration) ([]audit.Result, error) {
	s := &a.audit
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errAgentClosed
	}
	if s.results != nil && time.Since(s.at) < maxAge {
		return s.results, nil
	}
	res, err := audit.RunWith(ctx, a.resolver, audit.Options{
		ProcRoot: a.opts.ProcRoot, ReadTaskStates: a.audit.iter.Read, FallbackWarned: &s.fallbackWarned,
	})
	if err != nil && len(res) == 0 {
		return nil, err
	}
	if res == nil {
		res = []audit.Result{}
	}
	s.results, s.at = res, time.Now()
	a.exp.SetAudit(res)
	return res, err
}

// closeAudits waits for an audit in progress and refuses later ones.
func (a *Agent) closeAudits() {
	a.audit.mu.Lock()
	a.audit.closed = true
	_ = a.audit.iter.Close()
	a.audit.mu.Unlock()
}

// auditLoop audits every AuditInterval, for the metric, until ctx ends.
func (a *Agent) auditLoop(ctx context.Context) {
	tick := time.NewTicker(a.opts.AuditInterval)
	defer tick.Stop()
	for first := true; ; first = false {
		if _, err := a.currentAudit(ctx, a.opts.AuditInterval); err != nil {
			a.log.Debug("audit", "error", err)
		}
		if a.opts.Audited != nil {
			a.opts.Audited(first)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
