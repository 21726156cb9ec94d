package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sigscope/sigscope/tracer"
)

// Every command that traces takes the same --ring-size, with the same
// default and the same checks.
func TestRingSizeOnEveryTracingCommand(t *testing.T) {
	for _, name := range []string{"trace", "timeline", "serve"} {
		cmd, _, err := newRootCmd().Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		f := cmd.Flags().Lookup("ring-size")
		if f == nil {
			t.Errorf("sigscope %s has no --ring-size", name)
			continue
		}
		if f.DefValue != formatSize(tracer.DefaultRingSize) || f.Value.Type() != "bytes" {
			t.Errorf("sigscope %s --ring-size: default %q type %q", name, f.DefValue, f.Value.Type())
		}
		if err := cmd.Flags().Set("ring-size", "3000"); err == nil || !strings.Contains(err.Error(), "power of two") {
			t.Errorf("sigscope %s --ring-size 3000: %v, want a power-of-two error", name, err)
		}
	}
}

func TestParseRingSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int // 0: an error
	}{
		{"4096", 4096}, {"4K", 4096}, {"4k", 4096}, {"64K", 64 << 10}, {"8M", 8 << 20}, {"1G", 1 << 30}, {" 16384 ", 16384},
		{"2048", 0}, {"3000", 0}, {"12K", 0}, {"2G", 0}, {"0", 0}, {"", 0}, {"K", 0}, {"-4096", 0}, {"4KB", 0},
		{"99999999999999999999", 0}, {"9007199254740992G", 0},
	} {
		got, err := parseRingSize(c.in, 4096)
		if c.want == 0 && err == nil || c.want != 0 && (err != nil || got != c.want) {
			t.Errorf("parseRingSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
		if c.want != 0 {
			if back, err := parseRingSize(formatSize(got), 4096); err != nil || back != got {
				t.Errorf("formatSize(%d) = %q reads back as %d, %v", got, formatSize(got), back, err)
			}
		}
	}
}

// A bad size stops the command before anything is loaded, as a usage error
// (exit code 2) naming the flag; -f and --server take no ring size.
func TestRingSizeUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"trace", "--ring-size", "1000"},
		{"serve", "--ring-size", "5M"},
		{"timeline", "--ring-size", "64K", "-f", "rec.jsonl"},
		{"timeline", "--ring-size", "64K", "--server", "http://127.0.0.1:1"},
	} {
		root := newRootCmd()
		root.SetArgs(args)
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), "ring-size") {
			t.Errorf("sigscope %s: %v, want an error naming --ring-size", strings.Join(args, " "), err)
		}
	}
}
