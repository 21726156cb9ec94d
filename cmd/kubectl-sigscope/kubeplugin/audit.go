package kubeplugin

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/episodes/audit"
	"github.com/sigscope/sigscope/internal/textsafe"
)

// AuditRow is one running container's prediction and the node it runs on.
type AuditRow struct {
	Node string `json:"node"`
	audit.Result
}

func (o *options) auditCmd() *cobra.Command {
	var onlyBad bool
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Predict how every running container will take its stop signal, across the cluster",
		Long: `Asks every node's agent to audit its running containers: how each main
process (PID 1, or the process the runtime started) takes the stop signal, its
language runtime (RUNTIME: nodejs, go, jvm, cpython, ...; "-" when not
recognised), and the prediction: graceful, ignored_by_init (the kernel will
drop it: exit 137 after the grace period), ignored, killed, unknown.
--only-bad keeps the ones that will not stop gracefully.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.runAudit(cmd, onlyBad) },
	}
	cmd.Flags().BoolVar(&onlyBad, "only-bad", false, "only containers whose prediction is not graceful")
	return cmd
}

func (o *options) runAudit(cmd *cobra.Command, onlyBad bool) error {
	ctx := cmd.Context()
	s, pods, err := o.begin(ctx)
	if err != nil {
		return err
	}
	q := apiv1.AuditQuery{Namespace: s.namespace}
	res, agents, err := readAgents[audit.Result](ctx, o, s, "/api/v1/audit", q.Values(), false)
	if err != nil {
		return err
	}
	rows := []AuditRow{}
	seen := map[string]bool{}
	for _, r := range res {
		for _, a := range r.Items {
			c := &a.Container
			if pods != nil && !pods[c.Namespace+"/"+c.Pod] || onlyBad && a.Prediction == audit.Graceful || seen[c.ID] {
				continue
			}
			seen[c.ID] = true
			rows = append(rows, AuditRow{Node: r.Agent.Node, Result: a})
		}
	}
	slices.SortFunc(rows, func(a, b AuditRow) int {
		return cmp.Or(a.Container.Compare(b.Container.Identity), strings.Compare(a.Node, b.Node))
	})
	if !o.table() {
		return o.writeList("AuditList", rows, agents, nil)
	}
	if len(rows) == 0 {
		what := "running containers"
		if onlyBad {
			what = "containers that will not stop gracefully"
		}
		fmt.Fprintf(o.stderr, "no %s in %s on %d node(s) read\n", what, orAll(s.namespace), len(res))
	}
	tw := tabwriter.NewWriter(o.stdout, 0, 8, 2, ' ', 0)
	if len(rows) > 0 {
		fmt.Fprintln(tw, "NODE\tNAMESPACE\tPOD\tCONTAINER\tPID\tCOMMAND\tRUNTIME\tSIGNAL\tCATCHES\tPREDICTION")
	}
	for _, r := range rows {
		c := &r.Container
		name := c.Name
		if name == "" {
			name = c.ShortID()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", cell(r.Node), cell(c.Namespace), cell(c.Pod), cell(name),
			r.PID1.PID, textsafe.Cell(cell(strings.Join(r.PID1.Cmdline, " ")), 32), textsafe.Cell(cell(string(r.PID1.Runtime)), 16),
			cell(r.StopSignal), strconv.FormatBool(r.Catches), cell(r.Prediction))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Hint != "" || r.Error != "" {
			fmt.Fprintf(o.stdout, "\n%s/%s %s: %s%s\n", textsafe.Terminal(r.Container.Namespace), textsafe.Terminal(r.Container.Pod),
				textsafe.Terminal(r.Container.Name), textsafe.Terminal(r.Hint), textsafe.Terminal(r.Error))
		}
	}
	unreadable(o.stdout, agents)
	return nil
}

// cell escapes an untrusted string for a table cell, at most 64
// characters; "-" when empty. Tabs and newlines are escaped too
// (tabwriter's separators).
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return textsafe.Cell(textsafe.Terminal(s), 64)
}
