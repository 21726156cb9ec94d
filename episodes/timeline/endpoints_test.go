package timeline

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// An episode's endpoints in its JSON: each Service's times, nine digits,
// omitted when not seen, and the lags of the first of them; read back to
// the same episode and the same bytes. An episode without them has no
// "endpoints" key (the recorded streams' tests hold the rest of its bytes).
func TestEndpointsJSON(t *testing.T) {
	ep := dockerStopEpisode(t)
	if b, _ := json.Marshal(ep); strings.Contains(string(b), `"endpoints"`) {
		t.Errorf("an episode without endpoints: %s", b)
	}

	stop := ep.StopAt
	ep.Endpoints = []EndpointChange{
		{Service: "shop/web", NotReadyAt: stop.Add(-3200 * time.Millisecond), NotServingAt: stop.Add(-3100 * time.Millisecond),
			TerminatingAt: stop.Add(-3200 * time.Millisecond), RemovedAt: stop.Add(10100 * time.Millisecond)},
		{Service: "shop/admin\xff"},
	}
	ep.Endpoints[0].SetLags(stop.Add(-3250*time.Millisecond), stop)
	ep.Endpoints[1].SetLags(stop.Add(-3250*time.Millisecond), stop)
	if c := ep.Endpoints[0]; *c.AfterDeletion != 50*time.Millisecond || *c.AfterStop != -3200*time.Millisecond {
		t.Errorf("lags %v %v, want 50ms -3.2s", *c.AfterDeletion, *c.AfterStop)
	}
	if c := ep.Endpoints[1]; c.AfterDeletion != nil || c.AfterStop != nil || !c.First().IsZero() {
		t.Errorf("no change seen, yet lags %v %v", c.AfterDeletion, c.AfterStop)
	}
	b, err := json.Marshal(ep)
	if err != nil {
		t.Fatal(err)
	}
	want := `"endpoints":[{"service":"shop/web","not_ready_at":"2026-11-21T20:16:55.895361713Z","not_serving_at":"2026-11-21T20:16:55.995361713Z",` +
		`"terminating_at":"2026-11-21T20:16:55.895361713Z","removed_at":"2026-11-21T20:17:09.195361713Z","after_deletion_s":0.05,"after_stop_s":-3.2},` +
		`{"service":"shop/admin\\xff"}]}`
	if !strings.HasSuffix(string(b), want) {
		t.Errorf("JSON\n%s\nwant it to end\n%s", b, want)
	}

	var back Episode
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	ep.Endpoints[1].Service = `shop/admin\xff` // as the JSON keeps it
	if !reflect.DeepEqual(back.Endpoints, ep.Endpoints) {
		t.Errorf("read back\n%+v\nwant\n%+v", back.Endpoints, ep.Endpoints)
	}
	if b2, _ := json.Marshal(back); !bytes.Equal(b, b2) {
		t.Errorf("round trip changed the JSON:\n%s\n%s", b, b2)
	}
	if err := json.Unmarshal([]byte(`{"endpoints":[{"service":"a/b","removed_at":"soon"}]}`), &back); err == nil {
		t.Errorf("a bad time was read")
	}
}

// First is the earliest time seen; the lags are nil without their
// reference.
func TestEndpointChangeFirst(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	c := EndpointChange{Service: "a/b", TerminatingAt: t0.Add(2 * time.Second), RemovedAt: t0.Add(time.Second), NotServingAt: t0.Add(3 * time.Second)}
	if !c.First().Equal(t0.Add(time.Second)) {
		t.Errorf("First %v", c.First())
	}
	c.SetLags(time.Time{}, t0)
	if c.AfterDeletion != nil || c.AfterStop == nil || *c.AfterStop != time.Second {
		t.Errorf("lags %v %v", c.AfterDeletion, c.AfterStop)
	}
}
