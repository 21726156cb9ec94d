package timeline

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// An episode read from any JSON writes valid UTF-8 JSON that reads back and
// writes the same bytes again: marshal∘unmarshal is stable after one round
// (what it does not keep, derived fields and unread keys, it drops at the
// first). Its text form, which promises to print an episode read from
// untrusted JSON safely, has no control character but the line ends, one
// line per step plus the title, the outcome and the hint, and the traffic's
// lines.
func FuzzEpisodeUnmarshalJSON(f *testing.F) {
	// testdata/fuzz/FuzzEpisodeUnmarshalJSON holds the episodes of the
	// recorded streams (`sigscope timeline -f testdata/streams/X.jsonl -o json`).
	for _, s := range []string{
		`{}`,
		`{"container":{"pidns":4026532177},"main":{"pid":1,"ns_pid":1,"comm":"sh"},"main_is_init":true,"outcome":"unfinished","start":"2026-11-25T02:14:50Z","stop_signal":"15","stop_verdict":"pid1_ignored","stop_at":"2026-11-25T02:14:50Z","cascade_kills":[],"steps":[]}`,
		`{"container":{"id":"x","name":"web\u001b[31m\\xff","pod":"p","namespace":"ns"},"owner":{"kind":"Deployment","name":"web"},"outcome":"killed","start":"0001-01-01T00:00:00Z","kill_sender":{"pid":7,"comm":"kubelet","kernel":true,"ancestors":[{"pid":1,"comm":"systemd"}]},"kill_at":"2026-11-25T02:14:50.5+05:30","exit_at":"2026-11-25T02:14:51Z","exit_status":137,"exit_signal":"KILL","prestop":{"kind":"exec","command":["sh","-c","sleep 5\n"],"start_at":"2026-11-25T02:14:40Z","exit_code":0},"grace_period_s":1e300,"cascade_kills":[{"pid":9,"ns_pid":2,"comm":"sleep"}],"cascade_kills_omitted":3,"oom_victims":[{"pid":9}],"steps":[{"at":-1.5,"time":"2026-11-25T02:14:50Z","kind":"sigkill","signal":"SIGRTMIN+3","sender":{"pid":7,"comm":"k"},"target":{"pid":9},"flags":["cross_ns","cgroup_kill"],"verdict":"delivered","exit_status":-1,"text":"a\nb\u0085"}],"steps_omitted":2,"hint":"fix\tit","stop_reason":"evicted","not_learnt":[],"id":3,"node":"n1"}`,
		`{"outcome":"graceful","steps":[{"at":9223372036.854775807,"kind":"x","target":{},"text":""}],"grace_period_s":-0.0000000004}`,
		`{"endpoints":[{"service":"shop/web","not_ready_at":"2026-11-25T02:14:50Z","removed_at":"2026-11-25T02:14:59.5+01:00","after_deletion_s":-0.05,"after_stop_s":4435383.62792128},{"service":""}]}`,
		`{"steps":[{"at":4414691.149212793,"kind":"x","target":{},"text":""}],"grace_period_s":4435383.62792128}`, // past 2^22 s
		`{"outcome":"graceful","steps":[],"traffic":{"netns":4026532500,"since":"2026-11-25T02:14:50Z","until":"2026-11-25T02:14:52Z","accepted":{"n":3,"first":"2026-11-25T02:14:50.1Z","last":"2026-11-25T02:14:51Z"},"closed":{"n":0},"reset_sent":{"n":1},"reset_received":null,"cut":{"n":2,"first":"2026-11-25T02:14:51Z"},"refused":null,"listener_closed":{"n":1,"first":"x"},"lost":9,"verdict":"v\u001b","hint":"h\n"}}`,
		`{"traffic":{"netns":1,"accepted":{"n":3},"refused":{"n":1},"lost":null,"verdict":"","unread":"the trace ended"}}`,
		`{"traffic":{"netns":0,"since":"2026-11-25T02:14:50Z","accepted":{"n":18446744073709551615},"refused":{"n":18446744073709551615},"cut":{"n":1}}}`,
		`{"steps":[{"flags":["bogus"]}]}`,
		`{"start":"not a time"}`,
		`null`, `[]`, `"episode"`,
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, b []byte) {
		var ep Episode
		if ep.UnmarshalJSON(b) != nil {
			return
		}
		m1, err := json.Marshal(ep)
		if err != nil {
			t.Fatalf("an episode read from %q does not marshal: %v", b, err)
		}
		if !utf8.Valid(m1) || !json.Valid(m1) {
			t.Fatalf("invalid JSON written: %q", m1)
		}
		var again Episode
		if err := json.Unmarshal(m1, &again); err != nil {
			t.Fatalf("an episode read from %q wrote %s, which does not read back: %v", b, m1, err)
		}
		// Durations are float seconds: past 2^22 s (48 days) a float64 has
		// no room for every nanosecond, and reading one back may move it by
		// a nanosecond or more each round. Those must be as close as the
		// float allows; everything else must be the same.
		if len(again.Steps) != len(ep.Steps) {
			t.Fatalf("%d steps read back as %d:\n%s", len(ep.Steps), len(again.Steps), m1)
		}
		near := func(what string, a, b *time.Duration) {
			if *a == *b {
				return
			}
			if x := float64(*a); math.Abs(x) < 1<<22*1e9 || math.Abs(x-float64(*b)) > math.Abs(x)/(1<<50)+1 {
				t.Fatalf("%s %d ns read back as %d ns:\n%s", what, *a, *b, m1)
			}
			*b = *a
		}
		if ep.GracePeriod > 0 { // else not written
			near("grace period", &ep.GracePeriod, &again.GracePeriod)
		}
		for i := range ep.Steps {
			near("step offset", &ep.Steps[i].At, &again.Steps[i].At)
		}
		if len(again.Endpoints) != len(ep.Endpoints) {
			t.Fatalf("%d endpoints read back as %d:\n%s", len(ep.Endpoints), len(again.Endpoints), m1)
		}
		for i, c := range ep.Endpoints {
			for _, l := range []struct{ a, b *time.Duration }{{c.AfterDeletion, again.Endpoints[i].AfterDeletion}, {c.AfterStop, again.Endpoints[i].AfterStop}} {
				if (l.a == nil) != (l.b == nil) {
					t.Fatalf("an endpoint's lag lost or made:\n%s", m1)
				}
				if l.a != nil {
					near("endpoint lag", l.a, l.b)
				}
			}
		}
		m2, err := json.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m1, m2) {
			t.Fatalf("marshal∘unmarshal is not stable after one round:\n%s\n%s", m1, m2)
		}

		var text bytes.Buffer
		if err := ep.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		out := text.String()
		if !utf8.ValidString(out) {
			t.Fatalf("WriteText wrote invalid UTF-8: %q", out)
		}
		for _, r := range out {
			if r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && r < 0xa0 {
				t.Fatalf("WriteText wrote control %U: %q", r, out)
			}
		}
		want := 2 + len(ep.Steps) // title, steps, outcome
		if ep.StepsOmitted > 0 {
			want++
		}
		if ep.Hint != "" {
			want++
		}
		if ep.Traffic != nil {
			want++
			if ep.Traffic.Hint != "" {
				want++
			}
		}
		if n := strings.Count(out, "\n"); n != want || !strings.HasSuffix(out, "\n") {
			t.Fatalf("WriteText wrote %d lines, want %d: %q", n, want, out)
		}
	})
}
