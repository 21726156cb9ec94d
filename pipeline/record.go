package pipeline

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/sigscope/sigscope/container"
	"github.com/sigscope/sigscope/tracer"
)

// hostPidNS is the inode of the initial pid namespace (PROC_PID_INIT_INO).
const hostPidNS = 0xEFFFFFFC

// AppendRecord writes one `trace -o json` line (docs/events.md): the event's
// documented object, with a "container" key when the event is about a
// container (see [About]) and a "sender_container" key when the sender is in
// another container than that one.
func AppendRecord(b []byte, e *tracer.Event, target, sender *container.Info) ([]byte, error) {
	ev, err := e.MarshalJSON()
	if err != nil {
		return b, err
	}
	about, other := About(target, sender)
	b = append(b, ev[:len(ev)-1]...) // the object without its closing brace
	for _, kv := range []struct {
		key string
		c   *container.Info
	}{{"container", about}, {"sender_container", other}} {
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

// ReadRecording calls fn for each line of a `trace -o json` recording, with
// the containers of the event's target and sender as the recording says
// them. A line's "container" is its target's, except for a generate event
// whose target is in the host's pid namespace and whose sender is not: it
// is then the sender's (a container signalling a host process).
func ReadRecording(r io.Reader, fn func(e *tracer.Event, target, sender *container.Info) error) error {
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
			Container       *container.Summary `json:"container"`
			SenderContainer *container.Summary `json:"sender_container"`
		}
		if err := json.Unmarshal([]byte(text), &extra); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		var target, sender *container.Info
		if extra.Container != nil {
			target = extra.Container.Info()
		}
		if extra.SenderContainer != nil {
			sender = extra.SenderContainer.Info()
		}
		if e.Kind == tracer.KindGenerate && sender == nil && target != nil &&
			e.Target.PidNS == hostPidNS && e.Sender.PidNS != hostPidNS {
			target, sender = nil, target
		}
		if err := fn(&e, target, sender); err != nil {
			return err
		}
	}
	return sc.Err()
}
