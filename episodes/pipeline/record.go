package pipeline

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// AppendRecord writes one `trace -o json` line (docs/events.md): the event's
// documented object, with a "container" key when the event is about a
// container (see [About]) and a "sender_container" key when the sender is in
// another container than that one.
func AppendRecord(b []byte, e *sigvocab.Event, target, sender *identity.Info) ([]byte, error) {
	// Written by hand (sigvocab.Event.AppendJSON, identity.Info.AppendJSON):
	// trace writes one line per signal, without allocating.
	return appendContainers(e.AppendJSON(b), target, sender), nil
}

// RecordEncoder writes AppendRecord's lines, byte for byte, for a stream
// of events: `trace -o json` writes one per signal, and what repeats from
// one to the next (the sender and its ancestors, the target, the verdict,
// the second) is encoded once (sigvocab.Encoder). The zero value is ready;
// it is not safe for concurrent use.
type RecordEncoder struct {
	events sigvocab.Encoder
}

// Append appends e's line, as AppendRecord does.
func (r *RecordEncoder) Append(b []byte, e *sigvocab.Event, target, sender *identity.Info) []byte {
	return appendContainers(r.events.AppendEvent(b, e), target, sender)
}

// appendContainers turns the event object that ends b into the line: the
// containers added (see [About]), and the newline.
func appendContainers(b []byte, target, sender *identity.Info) []byte {
	b = b[:len(b)-1] // the object without its closing brace
	about, other := About(target, sender)
	if about != nil {
		b = about.AppendJSON(append(b, `,"container":`...))
	}
	if other != nil {
		b = other.AppendJSON(append(b, `,"sender_container":`...))
	}
	return append(b, '}', '\n')
}

// MaxRecordLine bounds a recording's line: a longer one is invalid (an
// event's line is well under 4 KiB).
const MaxRecordLine = 1 << 20

// RecordError is a recording's line that is not a valid record.
type RecordError struct {
	Line int // 1-based
	Err  error
}

func (e *RecordError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *RecordError) Unwrap() error { return e.Err }

// ReadOptions tells ReadRecordingWith what to do with bad lines.
type ReadOptions struct {
	// SkipInvalid goes on past invalid lines, counting them; without it
	// the first one ends the read with a *RecordError.
	SkipInvalid bool
}

// ReadStats says what a read found.
type ReadStats struct {
	Records      int          // valid records handed to fn
	Skipped      int          // invalid lines skipped (SkipInvalid)
	FirstSkipped *RecordError // the first of them
	// Truncated: the last line had no newline and was no valid record: a
	// recording cut mid-write (Ctrl-C, a full disk). Never an error.
	Truncated bool
}

// ReadRecording calls fn for each line of a `trace -o json` recording, with
// the containers of the event's target and sender as the recording says
// them. A line's "container" is its target's, except for a generate event
// whose target is in the host's pid namespace and whose sender is not: it
// is then the sender's (a container signalling a host process). The first
// invalid line ends it with a *RecordError; a cut-off last line is ignored.
func ReadRecording(r io.Reader, fn func(e *sigvocab.Event, target, sender *identity.Info) error) error {
	_, err := ReadRecordingWith(r, ReadOptions{}, fn)
	return err
}

// ReadRecordingWith is ReadRecording with options, and says what it read.
// An error of fn ends the read and is returned as is.
func ReadRecordingWith(r io.Reader, opts ReadOptions, fn func(e *sigvocab.Event, target, sender *identity.Info) error) (ReadStats, error) {
	var st ReadStats
	br := bufio.NewReaderSize(r, 64<<10)
	for line := 1; ; line++ {
		text, complete, tooLong, err := readLine(br)
		if err != nil && err != io.EOF {
			return st, err
		}
		if len(text) == 0 && !tooLong && err == io.EOF {
			return st, nil
		}
		var (
			e              *sigvocab.Event
			target, sender *identity.Info
			perr           error
		)
		if tooLong {
			perr = fmt.Errorf("longer than %d bytes", MaxRecordLine)
		} else {
			e, target, sender, perr = parseRecord(text)
		}
		switch {
		case perr != nil && !complete && err == io.EOF:
			st.Truncated = true
			return st, nil
		case perr != nil:
			rerr := &RecordError{Line: line, Err: perr}
			if !opts.SkipInvalid {
				return st, rerr
			}
			st.Skipped++
			if st.FirstSkipped == nil {
				st.FirstSkipped = rerr
			}
		case e != nil:
			st.Records++
			if ferr := fn(e, target, sender); ferr != nil {
				return st, ferr
			}
		}
		if err == io.EOF {
			return st, nil
		}
	}
}

// Replay runs a recording through the timeline engine e as `sigscope
// timeline -f` does: each record's event with its target's container as the
// recording names it, then, once the recording is read to its end, what the
// engine still holds (e.Flush). fn gets the episodes as they complete; an
// error of fn ends the replay and is returned as is. What was read, and the
// errors of a bad recording, are ReadRecordingWith's. It is the one replay
// of a recording: the command's, and the tests' (pipelinetest).
func Replay(r io.Reader, opts ReadOptions, e *timeline.Engine, fn func([]timeline.Episode) error) (ReadStats, error) {
	st, err := ReadRecordingWith(r, opts, func(ev *sigvocab.Event, target, _ *identity.Info) error {
		return fn(e.Add(ev, target))
	})
	if err != nil {
		return st, err
	}
	return st, fn(e.Flush())
}

// readLine reads one line without its newline; complete says it ended in
// one. A line longer than MaxRecordLine is read to its end but not kept
// (tooLong): memory stays bounded whatever the input.
func readLine(br *bufio.Reader) (text []byte, complete, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if len(text)+len(chunk) > MaxRecordLine {
			tooLong, text = true, nil
		} else if !tooLong {
			text = append(text, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == nil {
			complete = true
			if !tooLong {
				text = text[:len(text)-1]
			}
		}
		return text, complete, tooLong, err
	}
}

// parseRecord decodes one line; nil event for a blank line.
func parseRecord(b []byte) (e *sigvocab.Event, target, sender *identity.Info, err error) {
	text := strings.TrimSpace(string(b))
	if text == "" {
		return nil, nil, nil, nil
	}
	e = new(sigvocab.Event)
	if err := json.Unmarshal([]byte(text), e); err != nil {
		return nil, nil, nil, err
	}
	var extra struct {
		Container       *identity.Summary `json:"container"`
		SenderContainer *identity.Summary `json:"sender_container"`
	}
	if err := json.Unmarshal([]byte(text), &extra); err != nil {
		return nil, nil, nil, err
	}
	if extra.Container != nil {
		target = extra.Container.Info()
	}
	if extra.SenderContainer != nil {
		sender = extra.SenderContainer.Info()
	}
	if e.Kind == sigvocab.KindGenerate && sender == nil && target != nil &&
		e.Target.PidNS == sigvocab.HostPidNS && e.Sender.PidNS != sigvocab.HostPidNS {
		target, sender = nil, target
	}
	return e, target, sender, nil
}
