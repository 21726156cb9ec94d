package identity

import "testing"

// The one match rule: an ID prefix or a name, a pod by namespace and name,
// each "" for any.
func TestFilter(t *testing.T) {
	const id = "3f2a1b9c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8"
	for _, c := range []struct {
		f    Filter
		want bool
	}{
		{Filter{}, true},
		{Filter{Container: "3f2a"}, true},
		{Filter{Container: "web"}, true},
		{Filter{Container: "we"}, false}, // a name matches whole, an ID by prefix
		{Filter{Container: "2a1b"}, false},
		{Filter{Namespace: "shop", Pod: "web-0"}, true},
		{Filter{Namespace: "shop", Pod: "web-1"}, false},
		{Filter{Namespace: "other"}, false},
		{Filter{Container: "web", Namespace: "shop", Pod: "web-0"}, true},
	} {
		if got := c.f.Matches(Identity{ID: id, Name: "web", Namespace: "shop", Pod: "web-0"}); got != c.want {
			t.Errorf("%+v: %v, want %v", c.f, got, c.want)
		}
		if got := c.f.MatchesInfo(&Info{Identity: Identity{ID: id, Name: "web", Namespace: "shop", Pod: "web-0"}}); got != c.want {
			t.Errorf("%+v on an Info: %v, want %v", c.f, got, c.want)
		}
	}
	if !(Filter{}).MatchesInfo(nil) || (Filter{Container: "web"}).MatchesInfo(nil) {
		t.Error("no container passes only an inactive filter")
	}
}
