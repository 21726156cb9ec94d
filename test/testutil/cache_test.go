package testutil

import "testing"

func TestBuildCache(t *testing.T) {
	for _, c := range []struct {
		env, want string
		err       bool
	}{
		{env: "", want: "/var/cache/sigscope/crio"},
		{env: "/tmp/c/", want: "/tmp/c/crio"},
		{env: "rel/dir", err: true},
	} {
		t.Setenv("SIGSCOPE_CACHE", c.env)
		got, err := BuildCache("crio")
		if (err != nil) != c.err || got != c.want {
			t.Errorf("SIGSCOPE_CACHE=%q: BuildCache(crio) = %q, %v; want %q (error: %v)", c.env, got, err, c.want, c.err)
		}
	}
}
