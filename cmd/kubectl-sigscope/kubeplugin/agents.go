package kubeplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/sigscope/sigscope/api/v1"
)

// Agent is one node agent pod the plugin found.
type Agent struct {
	Node string `json:"node"`
	Pod  string `json:"pod,omitempty"` // namespace/name
	// Error says why nothing was read from it: not running, unreachable
	// through the API server, or an error of its own. Empty when read.
	Error string `json:"error,omitempty"`

	name, namespace string
	port            string
	ready           bool
	permission      *PermissionError // the user's RBAC refused the proxy
}

// Fleet reaches the node agents through the API server's pod proxy: no
// network path to the nodes, and no credentials but the user's (list pods
// and get pods/proxy in the agents' namespace).
type Fleet struct {
	API       *apiServer
	HTTP      *http.Client // from the same rest.Config: the user's credentials
	Namespace string       // the agents' namespace
	Selector  string       // the agents' pods
	Port      string       // "" for the port named "metrics" of each pod
	Scheme    string       // "http" or "https"
	// Timeout bounds each agent's read, all of its requests together, from
	// its first one (--agent-timeout); 0 is none.
	Timeout time.Duration
	// MaxInFlight bounds the agents read at once, and so the requests in
	// flight (--max-in-flight); below 1 is 1.
	MaxInFlight int
}

// PermissionError is a request the user's RBAC refused: it names the verb,
// resource and namespace to grant.
type PermissionError struct {
	Verb, Resource, Namespace string
	Err                       error
}

func (e *PermissionError) Error() string {
	where := "cluster-wide"
	if e.Namespace != "" {
		where = "in namespace " + e.Namespace
	}
	return fmt.Sprintf("permission denied: kubectl sigscope needs %q on %q %s (the agents' namespace): bind the ClusterRole "+
		"sigscope-reader there, e.g. kubectl -n %s create rolebinding NAME --clusterrole=sigscope-reader --user=USER; "+
		"check with kubectl auth can-i %s %s -n %s; the API server said: %v",
		e.Verb, e.Resource, where, e.Namespace, e.Verb, e.Resource, e.Namespace, e.Err)
}

func (e *PermissionError) Unwrap() error { return e.Err }

// Discover lists the agent pods, one entry per pod; pods that do not run
// carry their Error already. An error when none can be listed.
func (f *Fleet) Discover(ctx context.Context) ([]Agent, error) {
	pods, err := f.API.pods(ctx, f.Namespace, f.Selector)
	if err != nil {
		if apierrors.IsForbidden(err) {
			return nil, &PermissionError{Verb: "list", Resource: "pods", Namespace: f.Namespace, Err: err}
		}
		return nil, fmt.Errorf("listing the agent pods in namespace %s (%s): %w", f.Namespace, f.Selector, err)
	}
	var out []Agent
	for i := range pods {
		p := &pods[i]
		a := Agent{Node: p.Spec.NodeName, Pod: p.Metadata.Namespace + "/" + p.Metadata.Name, name: p.Metadata.Name, namespace: p.Metadata.Namespace, port: f.Port}
		if a.port == "" {
			a.port = metricsPort(p)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				a.ready = true
			}
		}
		switch {
		case p.Metadata.DeletionTimestamp != nil:
			a.Error = "agent pod is terminating"
		case p.Status.Phase != "Running":
			a.Error = fmt.Sprintf("agent pod is %s%s", p.Status.Phase, waitingReason(p))
		case a.port == "":
			a.Error = "agent pod has no container port named metrics (set --agent-port)"
		}
		if a.Node == "" {
			a.Node = "(unscheduled)"
		}
		out = append(out, a)
	}
	// Ready pods first, then by node: with two agents on a node (a rollout)
	// both are read and their episodes merged.
	slices.SortStableFunc(out, func(a, b Agent) int {
		if a.Node != b.Node {
			return strings.Compare(a.Node, b.Node)
		}
		if a.ready != b.ready {
			if a.ready {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Pod, b.Pod)
	})
	return out, nil
}

// nodesWithoutAgent lists the nodes of list where no agent pod was found.
// The list needs "list nodes", which the readers' ClusterRole does not
// grant: without it (or on any error) readAgents says nothing of them.
func nodesWithoutAgent(list []node, agents []Agent) (nodes []string) {
	for _, n := range list {
		if !slices.ContainsFunc(agents, func(a Agent) bool { return a.Node == n.Metadata.Name }) {
			nodes = append(nodes, n.Metadata.Name)
		}
	}
	return nodes
}

func metricsPort(p *pod) string {
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == "metrics" {
				return strconv.Itoa(int(cp.ContainerPort))
			}
		}
	}
	return ""
}

func waitingReason(p *pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return " (" + w.Reason + ")"
		}
	}
	return ""
}

// get reads path (with query) from agent a through the pod proxy and decodes
// its JSON into v; it follows rel="next" Link headers when v is a pointer
// to a slice, appending each page.
func (f *Fleet) get(ctx context.Context, a *Agent, path string, query url.Values, v any) error {
	name := a.name + ":" + a.port
	if f.Scheme == "https" {
		name = "https:" + name
	}
	base := f.API.proxyURL(a.namespace, name, path)
	base.RawQuery = query.Encode()
	next := base
	for page := 0; next != nil; page++ {
		if page == 1000 {
			return errors.New("more than 1000 pages")
		}
		link, err := f.getPage(ctx, a, next, v)
		if err != nil {
			return err
		}
		next = nil
		if link != "" {
			ref, err := url.Parse(link)
			if err != nil {
				return fmt.Errorf("agent's Link header %q: %w", link, err)
			}
			next = base.ResolveReference(ref)
		}
	}
	return nil
}

// getPage reads one page and returns the rel="next" link, if any.
func (f *Fleet) getPage(ctx context.Context, a *Agent, u *url.URL, v any) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := f.HTTP.Do(req)
	if err != nil {
		return "", fmt.Errorf("API server: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", f.proxyError(a, resp)
	}
	// A page decodes into a fresh slice appended to v's.
	if err := appendJSON(resp.Body, v); err != nil {
		return "", fmt.Errorf("agent's answer: %w", err)
	}
	return nextLink(resp.Header.Values("Link")), nil
}

// proxyError turns a failed proxy request into a clear error: a refusal of
// the user's RBAC names the permission; the API server's own failure to
// reach the pod (a Status object) says so; anything else is the agent's.
func (f *Fleet) proxyError(a *Agent, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" {
		err := &apierrors.StatusError{ErrStatus: st}
		if resp.StatusCode == http.StatusForbidden {
			return &PermissionError{Verb: "get", Resource: "pods/proxy", Namespace: a.namespace, Err: err}
		}
		return fmt.Errorf("unreachable through the API server: %s", st.Message)
	}
	msg := strings.TrimSpace(string(body))
	if resp.StatusCode == http.StatusForbidden && msg == "" {
		return &PermissionError{Verb: "get", Resource: "pods/proxy", Namespace: a.namespace, Err: errors.New(resp.Status)}
	}
	return fmt.Errorf("agent answered %s: %s", resp.Status, msg)
}

// appendJSON decodes r into v; when v points to a slice, the page's items
// are appended to what it holds.
func appendJSON(r io.Reader, v any) error {
	switch p := v.(type) {
	case *[]json.RawMessage:
		var page []json.RawMessage
		if err := json.NewDecoder(r).Decode(&page); err != nil {
			return err
		}
		*p = append(*p, page...)
		return nil
	default:
		return json.NewDecoder(r).Decode(v)
	}
}

// nextLink finds the URI of rel="next" in Link headers (RFC 8288), as the
// agent writes them: <URI>; rel="next".
func nextLink(values []string) string {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			uri, params, ok := strings.Cut(strings.TrimSpace(part), ";")
			if !ok || !strings.HasPrefix(uri, "<") || !strings.HasSuffix(uri, ">") {
				continue
			}
			for _, p := range strings.Split(params, ";") {
				k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.EqualFold(k, "rel") && strings.Trim(val, `"`) == "next" {
					return uri[1 : len(uri)-1]
				}
			}
		}
	}
	return ""
}

// Result is what one agent answered.
type Result[T any] struct {
	Agent *Agent
	Items []T
	Info  *apiv1.Info
}

// ReadAll asks every running agent for path (with query) and returns the
// answers of those that gave one; each agent's Error is set when it failed.
// withInfo also reads /api/v1/info (the window each agent can see).
//
// At most f.MaxInFlight agents are read at once, and an agent's requests
// (its pages, then its info) go one after the other, so at most that many
// requests are in flight: each one holds a stream or a connection to the API
// server and a share of the user's concurrency there (API Priority and
// Fairness), and a fleet of thousands of nodes must not ask for all of them
// at once. Each agent gets f.Timeout from its first request: the time spent
// waiting for a slot is not counted, so slow agents ahead in the queue do
// not use up the time of those behind them.
func ReadAll[T any](ctx context.Context, f *Fleet, agents []Agent, path string, query url.Values, withInfo bool) []Result[T] {
	sem := make(chan struct{}, max(f.MaxInFlight, 1))
	results := make([]Result[T], len(agents))
	var wg sync.WaitGroup
	for i := range agents {
		a := &agents[i]
		if a.Error != "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				a.Error = "not read: " + ctx.Err().Error()
				return
			}
			defer func() { <-sem }()
			res, err := readAgent[T](ctx, f, a, path, query, withInfo)
			if err != nil {
				a.Error = err.Error()
				var pe *PermissionError
				if errors.As(err, &pe) {
					a.permission = pe
				}
				return
			}
			results[i] = res
		}()
	}
	wg.Wait()
	var out []Result[T]
	for _, r := range results {
		if r.Agent != nil {
			out = append(out, r)
		}
	}
	return out
}

// readAgent reads path, and with withInfo /api/v1/info, from one agent
// within f.Timeout.
func readAgent[T any](ctx context.Context, f *Fleet, a *Agent, path string, query url.Values, withInfo bool) (Result[T], error) {
	actx := ctx
	if f.Timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, f.Timeout)
		defer cancel()
	}
	res := Result[T]{Agent: a}
	var raw []json.RawMessage
	err := f.get(actx, a, path, query, &raw)
	if err == nil && withInfo {
		var in apiv1.Info
		if err = f.get(actx, a, "/api/v1/info", nil, &in); err == nil {
			res.Info = &in
		}
	}
	if err != nil {
		// The user's interrupt is not the agent's fault; our deadline is
		// said as the flag that sets it, rather than as an URL and
		// "context deadline exceeded".
		if ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
			return res, fmt.Errorf("timed out: no answer within %v (--agent-timeout)", f.Timeout)
		}
		return res, err
	}
	for _, m := range raw {
		var item T
		if err := json.Unmarshal(m, &item); err != nil {
			return res, fmt.Errorf("agent's answer: %w", err)
		}
		res.Items = append(res.Items, item)
	}
	return res, nil
}
