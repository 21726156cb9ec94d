package main

import (
	"testing"

	"github.com/sigscope/sigscope/container"
)

func TestContainerFilter(t *testing.T) {
	web := &container.Info{ID: "abcdef", Name: "web", Pod: "web-1", Namespace: "shop"}
	for _, c := range []struct {
		container, pod string
		in             *container.Info
		want           bool
	}{
		{"", "", nil, true},
		{"abc", "", web, true},
		{"web", "", web, true},
		{"xyz", "", web, false},
		{"", "shop/web-1", web, true},
		{"", "shop/web-2", web, false},
		{"web", "", nil, false},
	} {
		f, _ := newContainerFilter(c.container, c.pod)
		if got := f.matchAny(nil, c.in); c.in != nil && got != c.want {
			t.Errorf("filter %q %q on the sender %+v: %v", c.container, c.pod, c.in, got)
		}
		f, err := newContainerFilter(c.container, c.pod)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.match(c.in); got != c.want {
			t.Errorf("filter %q %q on %+v: %v", c.container, c.pod, c.in, got)
		}
	}
	if _, err := newContainerFilter("", "nopod"); err == nil {
		t.Error("--pod without a slash accepted")
	}
}
