package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/sigscope/sigscope/exporter"
)

// buildInfoLabel is one label of sigscope_build_info.
type buildInfoLabel struct{ name, value string }

// buildInfo returns the labels of sigscope_build_info as the agent's
// exporter exports them, from the same buildVersion that serve gives it:
// `sigscope version` and the metric cannot disagree, in values, in
// escaping, or in which labels there are. version comes first, the others in
// the exposition's order.
func buildInfo() ([]buildInfoLabel, error) {
	version, revision := buildVersion()
	reg := prometheus.NewRegistry()
	if err := reg.Register(exporter.New(exporter.Options{Version: version, Revision: revision})); err != nil {
		return nil, err
	}
	mfs, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	for _, mf := range mfs {
		if mf.GetName() != "sigscope_build_info" || len(mf.GetMetric()) != 1 {
			continue
		}
		var out []buildInfoLabel
		for _, lp := range mf.GetMetric()[0].GetLabel() {
			l := buildInfoLabel{lp.GetName(), lp.GetValue()}
			if l.name == "version" {
				out = append([]buildInfoLabel{l}, out...)
			} else {
				out = append(out, l)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("the exporter exports no sigscope_build_info")
}

// versionText is what `sigscope version` and `sigscope --version` print:
// one "label: value" line per label of sigscope_build_info.
func versionText() (string, error) {
	labels, err := buildInfo()
	if err != nil {
		return "", err
	}
	width := 0
	for _, l := range labels {
		width = max(width, len(l.name))
	}
	var b strings.Builder
	for _, l := range labels {
		fmt.Fprintf(&b, "%-*s %s\n", width+1, l.name+":", l.value)
	}
	return b.String(), nil
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the build: version, revision and Go version, as sigscope_build_info labels them",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printVersion(cmd.OutOrStdout())
		},
	}
}

func printVersion(w io.Writer) error {
	text, err := versionText()
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, text)
	return err
}
