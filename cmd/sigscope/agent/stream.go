package agent

import (
	"bufio"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/episodes/timeline"
)

// streamBuffer is the most one answer of /api/v1/episodes holds besides
// the ring's lines: they are copied through it to the connection, so that
// fifty clients reading the whole ring take 50 of these, not 50 answers.
const streamBuffer = 32 << 10

var streamBuffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, streamBuffer) }}

// encodeLine is ep's line as the API writes it (apiv1.EpisodeLine), nil
// when it cannot be encoded: matching encodes it again and answers the
// error then.
func encodeLine(ep *timeline.Episode) []byte {
	line, err := apiv1.EpisodeLine(ep)
	if err != nil {
		slog.Default().Warn("an episode cannot be encoded", "id", ep.ID, "error", err)
		return nil
	}
	return line
}

// writeEpisodes writes lines as one JSON array, byte for byte what
// encoding/json writes for the episodes they encode (writeJSON): each line
// is an element's encoding and a newline, which the array has only at its
// end. Its length is known, so it is sent with a Content-Length.
func writeEpisodes(w http.ResponseWriter, lines [][]byte) {
	size := 3 // "[", "]\n"
	for _, l := range lines {
		size += len(l) // each line's newline makes room for its comma
	}
	if len(lines) > 0 {
		size-- // n elements, n-1 commas
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(size))
	bw := streamBuffers.Get().(*bufio.Writer)
	bw.Reset(w)
	defer func() {
		bw.Reset(nil) // not to keep the connection from the collector
		streamBuffers.Put(bw)
	}()
	_ = bw.WriteByte('[')
	for i, l := range lines {
		if i > 0 {
			_ = bw.WriteByte(',')
		}
		_, _ = bw.Write(l[:len(l)-1])
	}
	_, _ = bw.WriteString("]\n")
	// A client gone mid-answer is no error of the agent's: nothing to do.
	_ = bw.Flush()
}
