package kubeplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/internal/textsafe"
)

// UsageError marks bad flags and arguments (exit status 2).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// options are the flags every command shares: kubectl's own (kubeconfig,
// context, namespace, ...) and where the agents are.
type options struct {
	loading   *clientcmd.ClientConfigLoadingRules
	overrides clientcmd.ConfigOverrides
	all       bool
	selector  string
	output    string

	agentNamespace, agentSelector, agentPort, agentScheme string
	agentTimeout                                          time.Duration
	maxInFlight                                           int

	stdout, stderr io.Writer
	version        string
}

// NewCommand is kubectl-sigscope's root command.
func NewCommand(stdout, stderr io.Writer, version string) *cobra.Command {
	o := &options{loading: clientcmd.NewDefaultClientConfigLoadingRules(), stdout: stdout, stderr: stderr, version: version}
	root := &cobra.Command{
		Use:   "kubectl-sigscope",
		Short: "Cluster-wide stop timelines and audits from sigscope's node agents",
		Long: `kubectl sigscope reads every node's sigscope agent (the DaemonSet of
deploy/chart/sigscope) through the API server's pod proxy, with your
kubeconfig and RBAC only: get and list pods, and get pods/proxy, in the
agents' namespace (the chart's ClusterRole sigscope-reader, bound there).

The agents are read --max-in-flight at a time, each within --agent-timeout,
and each answers only what was asked (namespace, pod, workload, window). An
agent that cannot be read is named on stderr and in the output; the command
fails only when no agent could be read. For history beyond the agents'
memory, or a large fleet, read your log backend (docs/kubectl.md).`,
		Example: `  kubectl sigscope timeline web-7d9f8-x2x4z        # one pod's stops, whichever node ran it
  kubectl sigscope timeline deploy/web -n shop     # every pod of a Deployment
  kubectl sigscope audit -A --only-bad             # containers that will not stop gracefully
  kubectl sigscope top -A --since 6h               # workloads to fix first`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return UsageError{err} })
	fl := root.PersistentFlags()
	fl.StringVar(&o.loading.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file")
	clientcmd.BindOverrideFlags(&o.overrides, fl, clientcmd.RecommendedConfigOverrideFlags(""))
	fl.BoolVarP(&o.all, "all-namespaces", "A", false, "every namespace")
	fl.StringVarP(&o.selector, "selector", "l", "", "only pods matching this label selector (pods that exist now)")
	fl.StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml")
	fl.StringVar(&o.agentNamespace, "agent-namespace", "sigscope", "namespace of the sigscope agents' DaemonSet")
	fl.StringVar(&o.agentSelector, "agent-selector", "app.kubernetes.io/name=sigscope", "label selector of the agents' pods")
	fl.StringVar(&o.agentPort, "agent-port", "", `the agents' port (default: each pod's container port named "metrics")`)
	fl.StringVar(&o.agentScheme, "agent-scheme", "http", "http, or https for agents serving TLS (chart value webConfig)")
	fl.DurationVar(&o.agentTimeout, "agent-timeout", 10*time.Second, "how long each agent gets to answer (all its requests, from the first)")
	fl.IntVar(&o.maxInFlight, "max-in-flight", 16, "how many agents are read at once: requests in flight through the API server")
	root.AddCommand(o.timelineCmd(), o.auditCmd(), o.topCmd(), o.rolloutCmd(), o.versionCmd())
	return root
}

func (o *options) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(o.stdout, "kubectl-sigscope %s (agent API %s)\n", o.version, apiv1.Version)
			return err
		},
	}
}

// session is what a command works with once the flags are read.
type session struct {
	fleet     *Fleet
	namespace string // "" with --all-namespaces

	// The cluster's nodes, listed once (session.nodes).
	nodeList  []node
	nodesErr  error
	nodesRead bool
}

// nodes lists the cluster's nodes, once for the command: readAgents names
// the nodes without an agent, and naming the clients of a stop reads their
// addresses (nameClusterPeers).
func (s *session) nodes(ctx context.Context) ([]node, error) {
	if !s.nodesRead {
		s.nodeList, s.nodesErr = s.fleet.API.nodes(ctx)
		s.nodesRead = true
	}
	return s.nodeList, s.nodesErr
}

func (o *options) session() (*session, error) {
	switch o.output {
	case "table", "text", "wide", "json", "yaml":
	default:
		return nil, UsageError{fmt.Errorf("--output %q: want table, json or yaml", o.output)}
	}
	if o.agentScheme != "http" && o.agentScheme != "https" {
		return nil, UsageError{fmt.Errorf("--agent-scheme %q: want http or https", o.agentScheme)}
	}
	if o.agentTimeout <= 0 {
		return nil, UsageError{fmt.Errorf("--agent-timeout %v: want a positive duration", o.agentTimeout)}
	}
	if o.maxInFlight < 1 {
		return nil, UsageError{fmt.Errorf("--max-in-flight %d: want 1 or more", o.maxInFlight)}
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(o.loading, &o.overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if o.all {
		ns = ""
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "kubectl-sigscope/" + o.version
	cfg.WrapTransport = poolFor(o.maxInFlight)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	api, err := newAPIServer(cfg, hc)
	if err != nil {
		return nil, err
	}
	return &session{namespace: ns, fleet: &Fleet{API: api, HTTP: hc, Namespace: o.agentNamespace,
		Selector: o.agentSelector, Port: o.agentPort, Scheme: o.agentScheme, Timeout: o.agentTimeout, MaxInFlight: o.maxInFlight}}, nil
}

// poolFor keeps up to n connections per host open between requests in
// the transport client-go builds, where it keeps 25 (2 in Go's default
// transport, which client-go uses for a plain-HTTP server such as kubectl
// proxy): over HTTP/1.1, n requests in flight to the API server are n
// connections, and a pool smaller than n closes the surplus whenever
// answers come back together, to dial again for the next requests. It sets
// no cap on connections per host (MaxConnsPerHost 0, as client-go leaves
// it): a cap below n would queue requests in the transport, and ReadAll
// bounds them already. Over HTTP/2 (an API server on TLS) the requests
// share one connection, up to the server's stream limit (250 or more).
func poolFor(n int) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		if rt == http.DefaultTransport {
			// The process's shared transport: not ours to change.
			t := http.DefaultTransport.(*http.Transport).Clone()
			widenPool(t, n)
			return t
		}
		if t := transportUnder(rt); t != nil {
			widenPool(t, n)
		}
		// Else not one client-go builds: left as it is.
		return rt
	}
}

// transportUnder is the *http.Transport under client-go's wrappers (for
// its cache's garbage collection, or to reload a CA file), which say what
// they wrap as k8s.io/apimachinery's utilnet.RoundTripperWrapper; nil when
// there is none.
func transportUnder(rt http.RoundTripper) *http.Transport {
	for rt != nil {
		switch t := rt.(type) {
		case *http.Transport:
			return t
		case interface{ WrappedRoundTripper() http.RoundTripper }:
			rt = t.WrappedRoundTripper()
		default:
			return nil
		}
	}
	return nil
}

func widenPool(t *http.Transport, n int) {
	t.MaxIdleConnsPerHost = max(t.MaxIdleConnsPerHost, n)
	if t.MaxIdleConns != 0 { // 0 is no limit
		t.MaxIdleConns = max(t.MaxIdleConns, n)
	}
	t.MaxConnsPerHost = 0
}

// begin reads the flags and, with -l, the pods it selects. Every command
// filters on the session's namespace ("" for all), in its query
// (apiv1.EpisodeQuery or apiv1.AuditQuery).
func (o *options) begin(ctx context.Context) (*session, map[string]bool, error) {
	s, err := o.session()
	if err != nil {
		return nil, nil, err
	}
	pods, err := o.podSet(ctx, s)
	if err != nil {
		return nil, nil, err
	}
	return s, pods, nil
}

// podSet is the pods -l selects now, "namespace/name"; nil without -l.
func (o *options) podSet(ctx context.Context, s *session) (map[string]bool, error) {
	if o.selector == "" {
		return nil, nil
	}
	pods, err := s.fleet.API.pods(ctx, s.namespace, o.selector)
	if err != nil {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("-l needs list pods in %s: %w", orAll(s.namespace), err)
		}
		return nil, fmt.Errorf("-l %s: %w", o.selector, err)
	}
	set := map[string]bool{}
	for _, p := range pods {
		set[p.Metadata.Namespace+"/"+p.Metadata.Name] = true
	}
	return set, nil
}

func orAll(ns string) string {
	if ns == "" {
		return "every namespace"
	}
	return "namespace " + ns
}

// readAgents finds the agents and reads path from each. It reports the ones
// that could not be read on stderr; it fails when none could.
func readAgents[T any](ctx context.Context, o *options, s *session, path string, q url.Values, withInfo bool) ([]Result[T], []Agent, error) {
	agents, err := s.fleet.Discover(ctx)
	if err != nil {
		return nil, nil, err
	}
	if nodes, err := s.nodes(ctx); err == nil {
		for _, n := range nodesWithoutAgent(nodes, agents) {
			agents = append(agents, Agent{Node: n, Error: "no agent pod on this node"})
		}
	}
	if len(agents) == 0 {
		return nil, nil, fmt.Errorf("no sigscope agent pods in namespace %s (selector %s): is the DaemonSet installed there? (docs/kubectl.md; --agent-namespace)",
			s.fleet.Namespace, s.fleet.Selector)
	}
	res := ReadAll[T](ctx, s.fleet, agents, path, q, withInfo)
	var perm *PermissionError
	for i := range agents {
		a := &agents[i]
		if a.Error == "" {
			continue
		}
		if a.permission != nil {
			perm = a.permission
			continue
		}
		fmt.Fprintf(o.stderr, "warning: %s\n", agentErr(a))
	}
	if len(res) == 0 {
		if perm != nil {
			return nil, agents, perm
		}
		return nil, agents, fmt.Errorf("no agent could be read (%d found, %d nodes)", len(agents), countNodes(agents))
	}
	if perm != nil {
		// Once for all: the same permission is missing for every agent.
		fmt.Fprintf(o.stderr, "warning: %s\n", textsafe.Terminal(perm.Error()))
	}
	return res, agents, nil
}

func agentErr(a *Agent) string {
	// The error may quote the agent's answer or the API server's: escaped
	// for the terminal like every untrusted string.
	line := "node " + a.Node + ": "
	if a.Pod != "" {
		line += "agent " + a.Pod + ": "
	}
	return textsafe.Terminal(line + a.Error)
}

func countNodes(agents []Agent) int {
	seen := map[string]bool{}
	for _, a := range agents {
		seen[a.Node] = true
	}
	return len(seen)
}

// unreadable writes the trailer of a table: the agents not read.
func unreadable(w io.Writer, agents []Agent) {
	first := true
	for i := range agents {
		a := &agents[i]
		if a.Error == "" {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nnot read:")
			first = false
		}
		fmt.Fprintf(w, "  %s\n", agentErr(a))
	}
}

// list is the JSON and YAML form of every command's answer.
type list struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Items      any      `json:"items"`
	Agents     []Agent  `json:"agents"`
	Warnings   []string `json:"warnings,omitempty"`
}

func (o *options) writeList(kind string, items any, agents []Agent, warnings []string) error {
	l := list{APIVersion: "sigscope.dev/v1", Kind: kind, Items: items, Agents: agents, Warnings: warnings}
	if l.Agents == nil {
		l.Agents = []Agent{}
	}
	b, err := json.MarshalIndent(&l, "", "  ")
	if err != nil {
		return err
	}
	if o.output == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
	} else {
		b = append(b, '\n')
	}
	_, err = o.stdout.Write(b)
	return err
}

func (o *options) table() bool { return o.output != "json" && o.output != "yaml" }

// IsUsage says whether err is a usage error (exit status 2).
func IsUsage(err error) bool {
	var ue UsageError
	return errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") ||
		strings.HasPrefix(err.Error(), "accepts ")
}
