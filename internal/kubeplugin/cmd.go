package kubeplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/sigscope/sigscope/agent/apiv1"
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

An agent that cannot be read is named on stderr and in the output; the
command fails only when no agent could be read.`,
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
	fl.DurationVar(&o.agentTimeout, "agent-timeout", 20*time.Second, "how long to wait for each agent's answer")
	root.AddCommand(o.timelineCmd(), o.auditCmd(), o.topCmd(), o.versionCmd())
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
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	api, err := newAPIServer(cfg, hc)
	if err != nil {
		return nil, err
	}
	return &session{namespace: ns, fleet: &Fleet{API: api, HTTP: hc, Namespace: o.agentNamespace,
		Selector: o.agentSelector, Port: o.agentPort, Scheme: o.agentScheme, Timeout: o.agentTimeout, Parallel: 16}}, nil
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
	if missing, ok := s.fleet.NodesWithoutAgent(ctx, agents); ok {
		for _, n := range missing {
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
		fmt.Fprintf(o.stderr, "warning: node %s: %s\n", a.Node, agentErr(a))
	}
	if len(res) == 0 {
		if perm != nil {
			return nil, agents, perm
		}
		return nil, agents, fmt.Errorf("no agent could be read (%d found, %d nodes)", len(agents), countNodes(agents))
	}
	if perm != nil {
		// Once for all: the same permission is missing for every agent.
		fmt.Fprintf(o.stderr, "warning: %v\n", perm)
	}
	return res, agents, nil
}

func agentErr(a *Agent) string {
	if a.Pod == "" {
		return a.Error
	}
	return "agent " + a.Pod + ": " + a.Error
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
		fmt.Fprintf(w, "  node %s: %s\n", a.Node, agentErr(a))
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
