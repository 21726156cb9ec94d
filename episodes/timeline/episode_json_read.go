package timeline

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// Reading an episode back from its JSON (episode_json.go writes it).

// UnmarshalJSON reads an episode written by MarshalJSON (the CLI's tests and
// tools that post-process `sigscope timeline -o json`). Derived fields
// (kill_after_s, exit_after_s, stop_duration_s) are not read back: they
// follow from the times.
func (ep *Episode) UnmarshalJSON(b []byte) error {
	var j jsonEpisode
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	out := Episode{
		ID:             j.ID,
		Node:           j.Node,
		Owner:          j.Owner,
		Revision:       j.Revision,
		Container:      j.Container,
		Main:           j.Main,
		MainIsInit:     j.MainIsInit,
		ForwardingInit: j.ForwardingInit,
		Outcome:        j.Outcome,
		StopSender:     j.StopSender,
		KillSender:     j.KillSender,
		CascadeKills:   j.CascadeKills,
		CascadeOmitted: j.CascadeOmitted,
		EventsDropped:  j.EventsDropped,
		StartUnseen:    j.StartUnseen,
		OOMVictims:     j.OOMVictims,
		StepsOmitted:   j.StepsOmitted,
		Hint:           j.Hint,
		StopReason:     j.StopReason,
		NotLearnt:      j.NotLearnt,
	}
	var err error
	for _, f := range []struct {
		s   string
		dst *time.Time
	}{{j.Start, &out.Start}, {j.StopAt, &out.StopAt}, {j.KillAt, &out.KillAt}, {j.ExitAt, &out.ExitAt}, {j.TracedSince, &out.TracedSince}} {
		if *f.dst, err = parseTime(f.s); err != nil {
			return err
		}
	}
	if out.Endpoints, err = readEndpoints(j.Endpoints); err != nil {
		return err
	}
	if out.StopVerdict, err = parseFate(j.StopVerdict); err != nil {
		return err
	}
	if out.ReraiseVerdict, err = parseFate(j.ReraiseVerdict); err != nil {
		return err
	}
	if out.StopSignal, err = parseSignal(j.StopSignal); err != nil {
		return err
	}
	if out.ExitSignal, err = parseSignal(j.ExitSignal); err != nil {
		return err
	}
	if j.ExitStatus != nil {
		out.ExitStatus = *j.ExitStatus
	}
	if j.Traffic != nil {
		if out.Traffic, err = trafficFromJSON(j.Traffic); err != nil {
			return err
		}
	}
	if j.AtKill != nil {
		out.AtKill = atKillFromJSON(j.AtKill)
	}
	if j.GracePeriod != nil {
		out.GracePeriod, out.GraceFrom = fromSeconds(*j.GracePeriod), GraceSource(j.GraceFrom)
	}
	if j.StopTimeout != nil {
		out.StopTimeout = fromSeconds(*j.StopTimeout)
	}
	if p := j.PreStop; p != nil {
		out.PreStop = &PreStop{Kind: p.Kind, Command: p.Command, ExitStatus: p.ExitStatus, Estimated: p.Estimated, FromAPI: p.FromAPI}
		if out.PreStop.StartAt, err = parseTime(p.StartAt); err != nil {
			return err
		}
		if out.PreStop.EndAt, err = parseTime(p.EndAt); err != nil {
			return err
		}
		if h := p.AtKill; h != nil {
			out.PreStop.AtKill = &HookAt{Process: taskAtFromJSON(&h.Process), Verdict: h.Verdict}
			if h.Child != nil {
				c := taskAtFromJSON(h.Child)
				out.PreStop.AtKill.Child = &c
			}
		}
	}
	for _, js := range j.Steps {
		s := Step{
			At:     fromSeconds(js.At),
			Kind:   js.Kind,
			Sender: js.Sender,
			Target: js.Target,
			Exit:   js.Exit,
			Text:   js.Text,
		}
		if s.Time, err = parseTime(js.Time); err != nil {
			return err
		}
		if s.Verdict, err = parseFate(js.Verdict); err != nil {
			return err
		}
		if s.Signal, err = parseSignal(js.Signal); err != nil {
			return err
		}
		for _, w := range js.Flags {
			f, ok := sigvocab.ParseFlag(w)
			if !ok {
				return fmt.Errorf("step flags: unknown flag %q", w)
			}
			s.Flags |= f
		}
		out.Steps = append(out.Steps, s)
	}
	*ep = out
	return nil
}

func taskAtFromJSON(j *jsonTaskAt) TaskAt {
	t := TaskAt{Proc: Proc{PID: j.PID, NsPID: j.NsPID, Comm: j.Comm}, TID: j.TID, Syscall: j.Syscall, Arg: j.Arg, Fd: j.Fd, Ignores: j.Ignores, Handles: j.Handles, Unread: j.Unread}
	if j.CPUS != nil {
		d := time.Duration(*j.CPUS * float64(time.Second))
		t.CPU = &d
	}
	return t
}

func atKillFromJSON(j *jsonAtKill) *AtKill {
	a := &AtKill{Main: taskAtFromJSON(&j.Main), ThreadCount: j.ThreadCount, MoreThreads: j.MoreThreads, MoreChildren: j.MoreChildren, Verdict: j.Verdict}
	for i := range j.Threads {
		a.Threads = append(a.Threads, taskAtFromJSON(&j.Threads[i]))
	}
	for i := range j.Children {
		a.Children = append(a.Children, taskAtFromJSON(&j.Children[i]))
	}
	if j.SinceS != nil {
		a.Since = time.Duration(*j.SinceS * float64(time.Second))
	}
	return a
}

func splitFromJSON(j *jsonSplit) *[sigvocab.NumNetKinds]uint64 {
	if j == nil {
		return nil
	}
	var n [sigvocab.NumNetKinds]uint64
	for k, src := range j.kinds() {
		n[k] = *src
	}
	for k, src := range j.lastSpeakerKinds() {
		if *src != nil {
			n[k] = **src
		}
	}
	return &n
}

func trafficFromJSON(j *jsonTraffic) (*Traffic, error) {
	t := &Traffic{NetNS: j.NetNS, Verdict: j.Verdict, Hint: j.Hint, Unread: j.Unread, SeesRefused: j.Refused != nil, SeesLastSpeaker: j.Unanswered != nil,
		Own: splitFromJSON(j.Own), Others: splitFromJSON(j.Others), OwnUnknown: j.OwnUnknown, SeesData: j.SeesData}
	var err error
	if t.LastData, err = parseTime(j.LastData); err != nil {
		return nil, err
	}
	if t.Peers, err = peersFromJSON(j.Peers); err != nil {
		return nil, err
	}
	if t.Since, err = parseTime(j.Since); err != nil {
		return nil, err
	}
	if t.Until, err = parseTime(j.Until); err != nil {
		return nil, err
	}
	if j.Probes != nil {
		t.Probes = &[sigvocab.NumNetKinds]uint64{}
		for name, n := range *j.Probes {
			if k, ok := sigvocab.NetKindOf(name); ok {
				t.Probes[k] = n
			}
		}
	}
	for k, src := range j.counts() {
		if *src == nil {
			continue
		}
		c := &t.Counts[k]
		c.N = (*src).N
		if c.First, err = parseTime((*src).First); err != nil {
			return nil, err
		}
		if c.Last, err = parseTime((*src).Last); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// fromSeconds rounds, so that a duration written as float seconds reads back
// to the same nanosecond.
func fromSeconds(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("episode time: %w", err)
	}
	return t, nil
}

func parseSignal(s string) (sigvocab.Signal, error) {
	if s == "" {
		return 0, nil
	}
	return sigvocab.ParseSignal(s)
}

func parseFate(s string) (sigvocab.Fate, error) {
	if s == "" {
		return sigvocab.FateUnknown, nil
	}
	return sigvocab.ParseFate(s)
}
