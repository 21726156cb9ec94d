package timeline

import (
	"slices"
	"time"

	"github.com/sigscope/sigscope/internal/textsafe"
)

// EndpointChange is what the API server showed of a pod's endpoint in the
// EndpointSlices of one Service, as of the episode's completion: when the
// endpoints controller turned it not ready, not serving, terminating, and
// when it went from every slice of the Service. A pod's deletion starts
// this timeline beside the kubelet's (preStop hook, stop signal, SIGKILL),
// and nothing orders the two; kube-proxy and the load balancers stop
// sending new connections only after the slice changes.
//
// The times are when the agent saw each change (package kubemeta's
// informer, on the node's clock): an EndpointSlice carries no time per
// condition. Each is the first sight of the change into the state the
// endpoint is in (a readiness that failed and came back is forgotten);
// zero when it was not seen: not made yet when the episode completed, or
// made before the agent listed the slice.
type EndpointChange struct {
	Service string // "namespace/name"

	NotReadyAt    time.Time // conditions.ready went from true to false
	NotServingAt  time.Time // conditions.serving went from true to false
	TerminatingAt time.Time // conditions.terminating went from false to true
	RemovedAt     time.Time // the endpoint went from every slice of the Service (or its slice was deleted)

	// AfterDeletion and AfterStop are the time from the pod's deletion
	// (as the agent saw it) and from the episode's stop signal to the
	// first of the times above, negative when that came before; nil
	// without either. Set when the episode is annotated ([EndpointChange.SetLags]).
	AfterDeletion *time.Duration
	AfterStop     *time.Duration
}

// First is the earliest of the change's times; zero when none was seen.
func (c *EndpointChange) First() time.Time {
	var first time.Time
	for _, t := range []time.Time{c.NotReadyAt, c.NotServingAt, c.TerminatingAt, c.RemovedAt} {
		if !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

// SetLags sets AfterDeletion and AfterStop from the pod's deletion and the
// stop signal, each zero when not known.
func (c *EndpointChange) SetLags(deletedAt, stopAt time.Time) {
	c.AfterDeletion, c.AfterStop = nil, nil
	first := c.First()
	if first.IsZero() {
		return
	}
	if !deletedAt.IsZero() {
		d := first.Sub(deletedAt)
		c.AfterDeletion = &d
	}
	if !stopAt.IsZero() {
		d := first.Sub(stopAt)
		c.AfterStop = &d
	}
}

// addEndpointSteps puts a step in the timeline, at its time, for the first
// change of the pod's endpoint in each Service (Endpoints); its words are
// written with the others'.
func (ep *Episode) addEndpointSteps() {
	for i := range ep.Endpoints {
		c := &ep.Endpoints[i]
		first := c.First()
		if first.IsZero() {
			continue
		}
		s := Step{At: first.Sub(ep.Start), Time: first, Kind: StepEndpoint, facts: stepFacts{endpoint: c}}
		i, _ := slices.BinarySearchFunc(ep.Steps, first, func(s Step, t time.Time) int {
			if s.Time.After(t) {
				return 1
			}
			return -1
		})
		ep.Steps = slices.Insert(ep.Steps, i, s)
	}
}

// EndpointsNotRead is an episode's not_learnt entry when the EndpointSlices
// were not read; why is the reason (the API server's last answer), "" when
// there is none.
func EndpointsNotRead(why string) string {
	s := "endpoints: the EndpointSlices were not read"
	if why != "" {
		s += ": " + why
	}
	return s
}

// jsonEndpointChange is an EndpointChange in an episode's JSON
// (episode_json.go writes it and episode_json_read.go reads it, through
// the two functions below).
type jsonEndpointChange struct {
	Service       string   `json:"service"`
	NotReadyAt    string   `json:"not_ready_at,omitempty"`
	NotServingAt  string   `json:"not_serving_at,omitempty"`
	TerminatingAt string   `json:"terminating_at,omitempty"`
	RemovedAt     string   `json:"removed_at,omitempty"`
	AfterDeletion *float64 `json:"after_deletion_s,omitempty"`
	AfterStop     *float64 `json:"after_stop_s,omitempty"`
}

func endpointsJSON(cs []EndpointChange) []jsonEndpointChange {
	if len(cs) == 0 {
		return nil
	}
	out := make([]jsonEndpointChange, len(cs))
	for i, c := range cs {
		out[i] = jsonEndpointChange{
			Service:       textsafe.UTF8(c.Service),
			NotReadyAt:    jsonTime(c.NotReadyAt),
			NotServingAt:  jsonTime(c.NotServingAt),
			TerminatingAt: jsonTime(c.TerminatingAt),
			RemovedAt:     jsonTime(c.RemovedAt),
		}
		if c.AfterDeletion != nil {
			out[i].AfterDeletion = seconds(*c.AfterDeletion)
		}
		if c.AfterStop != nil {
			out[i].AfterStop = seconds(*c.AfterStop)
		}
	}
	return out
}

func readEndpoints(js []jsonEndpointChange) ([]EndpointChange, error) {
	if len(js) == 0 {
		return nil, nil
	}
	out := make([]EndpointChange, len(js))
	for i, j := range js {
		c := EndpointChange{Service: j.Service}
		for _, f := range []struct {
			s   string
			dst *time.Time
		}{{j.NotReadyAt, &c.NotReadyAt}, {j.NotServingAt, &c.NotServingAt}, {j.TerminatingAt, &c.TerminatingAt}, {j.RemovedAt, &c.RemovedAt}} {
			var err error
			if *f.dst, err = parseTime(f.s); err != nil {
				return nil, err
			}
		}
		if j.AfterDeletion != nil {
			d := fromSeconds(*j.AfterDeletion)
			c.AfterDeletion = &d
		}
		if j.AfterStop != nil {
			d := fromSeconds(*j.AfterStop)
			c.AfterStop = &d
		}
		out[i] = c
	}
	return out, nil
}
