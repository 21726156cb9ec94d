package v1

import (
	"bytes"
	"encoding/json"

	"github.com/sigscope/sigscope/episodes/timeline"
)

// EpisodeLine is an episode as the API writes it: its JSON (timeline's
// MarshalJSON) by encoding/json without HTML escaping, then a newline.
// /api/v1/episodes' array is made of these, each element's encoding being
// exactly what encoding/json writes for it; the agent's node journal
// writes one per line, so that a journal line is the object the API serves.
func EpisodeLine(ep *timeline.Episode) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ep); err != nil {
		return nil, err
	}
	// Exactly its size: a line may be kept as long as its episode is.
	return bytes.Clone(buf.Bytes()), nil
}
