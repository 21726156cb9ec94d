package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/sigscope/sigscope/container"
	"github.com/sigscope/sigscope/tracer"
)

// appendRecord writes one `trace -o json` line: the event's documented
// object, with a "container" key when the event is about a container (see
// eventContainers) and a "sender_container" key when the sender is in
// another container than that one.
func appendRecord(b []byte, e *tracer.Event, c, sender *container.Info) ([]byte, error) {
	ev, err := e.MarshalJSON()
	if err != nil {
		return b, err
	}
	b = append(b, ev[:len(ev)-1]...) // the object without its closing brace
	for _, kv := range []struct {
		key string
		c   *container.Info
	}{{"container", c}, {"sender_container", sender}} {
		if kv.c == nil {
			continue
		}
		cj, err := json.Marshal(kv.c.Summary())
		if err != nil {
			return b, err
		}
		b = append(b, `,"`...)
		b = append(b, kv.key...)
		b = append(b, `":`...)
		b = append(b, cj...)
	}
	return append(b, '}', '\n'), nil
}

// readRecording calls fn for each line of a `trace -o json` recording.
func readRecording(r io.Reader, fn func(*tracer.Event, *container.Info) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var e tracer.Event
		if err := json.Unmarshal([]byte(text), &e); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		var extra struct {
			Container *container.Summary `json:"container"`
		}
		if err := json.Unmarshal([]byte(text), &extra); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		var c *container.Info
		if extra.Container != nil {
			c = extra.Container.Info()
		}
		if err := fn(&e, c); err != nil {
			return err
		}
	}
	return sc.Err()
}

// containerFilter matches --container (an ID prefix or a name) and --pod
// (namespace/name).
type containerFilter struct {
	container string
	namespace string
	pod       string
}

func newContainerFilter(containerArg, podArg string) (containerFilter, error) {
	f := containerFilter{container: containerArg}
	if podArg != "" {
		ns, name, ok := strings.Cut(podArg, "/")
		if !ok || ns == "" || name == "" {
			return f, usageError{fmt.Errorf("--pod %q: want namespace/name", podArg)}
		}
		f.namespace, f.pod = ns, name
	}
	return f, nil
}

func (f containerFilter) active() bool { return f.container != "" || f.pod != "" }

// matchAny reports whether either container passes the filter.
func (f containerFilter) matchAny(a, b *container.Info) bool {
	return f.match(a) || (b != nil && f.match(b))
}

func (f containerFilter) match(c *container.Info) bool {
	if !f.active() {
		return true
	}
	if c == nil {
		return false
	}
	if f.container != "" && !strings.HasPrefix(c.ID, f.container) && c.Name != f.container {
		return false
	}
	if f.pod != "" && (c.Namespace != f.namespace || c.Pod != f.pod) {
		return false
	}
	return true
}

// eventContainers resolves the container an event is about (the target's,
// or for a signal a container sent to a host process, the sender's) and, for
// a signal sent from another container, the sender's.
func eventContainers(r *container.Resolver, e *tracer.Event) (about, sender *container.Info) {
	if r == nil {
		return nil, nil
	}
	about = r.Lookup(&e.Target)
	if e.Kind != tracer.KindGenerate {
		return about, nil
	}
	s := r.Lookup(&e.Sender)
	switch {
	case about == nil:
		return s, nil
	case s != nil && s.ID != about.ID:
		return about, s
	}
	return about, nil
}

// eventContainer is the container an event is about.
func eventContainer(r *container.Resolver, e *tracer.Event) *container.Info {
	c, _ := eventContainers(r, e)
	return c
}
