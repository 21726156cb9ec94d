package timeline

import "fmt"

// The words: every sentence an episode tells is made in the words files,
// and nowhere else. An episode is finished as facts → causes → words
// (Finish, facts.go): its outcome is decided from its facts (decide,
// outcome.go), its causes beside it (causes.go), and the words only turn
// them into sentences; they decide no cause and hold no rule. A completed
// episode gets its steps' texts and its hint ([episode.words]); its
// summary is made when it is asked for ([Episode.Summary]), since the
// caller may still add the stop's reason and grace. By family:
//
//	words_steps.go      each step's text, and the names of processes
//	words_summary.go    the summary, and how a sentence names the main process (MainRole)
//	words_hints.go      the hint of each outcome
//	words_atkill.go     what the main process and the preStop hook were doing at the SIGKILL, and the fix
//	words_traffic.go    what the stop cost the clients: the verdict, the hint, the counts
//	words_endpoints.go  the endpoint steps and the endpoint race
//	words_fixes.go      the fixes, each worded once: the audit's predictions end with them too
//
// A fate's own words ("ignored — PID 1 has no SIGTERM handler") are
// sigvocab's (fatetext.go). Untrusted comms are quoted unescaped: JSON and
// the terminal escape them, each once.

// words writes what a completed episode says, from its outcome and its
// causes (causes.go), decided first: each step's text, the hint, and what
// its traffic cost the clients.
func (ep *episode) words(c causes) {
	if a := ep.AtKill; a != nil {
		a.Verdict = ep.atKillVerdict(c.atKill)
	}
	if h := ep.hookAt; h != nil {
		h.Verdict = hookVerdict(h, c.hook)
	}
	for i := range ep.Steps {
		if ep.Steps[i].Kind == StepAtKill && ep.AtKill != nil {
			ep.Steps[i].Text = ep.AtKill.Verdict
			continue
		}
		if ep.Steps[i].Kind == StepHookAtKill && ep.hookAt != nil {
			ep.Steps[i].Text = ep.hookAt.Verdict
			continue
		}
		ep.Steps[i].Text = stepText(&ep.Steps[i])
	}
	ep.Hint = capitalize(ep.hint(c))
	if t := ep.Traffic; t != nil {
		t.Unread = ep.unread.words()
		t.OwnUnknown = ep.ownUnknown.words()
		t.Verdict = trafficVerdict(t, c.traffic)
		t.Hint = ep.trafficHint(c.traffic)
	}
	ep.summary, ep.race = ep.summaryText(), ep.raceText()
}

// count is "1 connection", "3 connections".
func count(n uint64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// countWas is "1 connection was", "3 connections were".
func countWas(n uint64, what string) string {
	if n == 1 {
		return count(n, what) + " was"
	}
	return count(n, what) + " were"
}

// capitalize starts a sentence that may begin with "the main process".
func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
