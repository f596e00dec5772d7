package fleet_test

import (
	"strings"
	"testing"

	"robotsgate/cache/fleet"
)

func TestCheckURL(t *testing.T) {
	// Every URL with a password uses this one: no message may show it.
	const secret = "s3cret"
	tests := []struct {
		url  string
		want string // in the error; "" for a good URL
	}{
		{url: "redis://127.0.0.1:6379"},
		{url: "redis://localhost"},
		{url: "redis://redis.internal:6380/3"},
		{url: "redis://:s3cret@127.0.0.1:6379/0"},
		{url: "rediss://robotsgate:s3cret@redis.internal/15"},
		{url: "rediss://:s3%2Fcr%3Fet@redis.internal"},
		{url: "redis://[::1]:6379/"},
		{url: "REDIS://localhost/01"},
		{url: "redis://robotsgate@host"},

		{url: "", want: "must start with redis:// or rediss://"},
		{url: "127.0.0.1:6379", want: "must start with redis:// or rediss://"},
		{url: ":s3cret@127.0.0.1:6379", want: "must start with redis:// or rediss://"},
		{url: "http://:s3cret@127.0.0.1:6379", want: `the scheme must be redis or rediss (TLS), not "http"`},
		{url: "unix:///run/redis.sock", want: `not "unix"`},
		{url: "redis://", want: "names no host"},
		{url: "redis://:s3cret@", want: "names no host"},
		{url: "redis://:s3cret@:6379", want: "names no host"},
		{url: "redis://:s3cret@host:port", want: "is not a valid URL"},
		{url: "redis://:s3cret@host:0", want: "the port must be a number from 1 to 65535"},
		{url: "redis://:s3cret@host:70000", want: "the port must be a number from 1 to 65535"},
		{url: "redis://:s3cret@host/-1", want: "the path must be a database number (0 or more)"},
		{url: "redis://:s3cret@host/one", want: "the path must be a database number (0 or more)"},
		{url: "redis://:s3cret@host/0/1", want: "the path must be a database number (0 or more)"},
		{url: "redis://:s3cret@host/99999999999", want: "the path must be a database number (0 or more)"},
		{url: "redis://:s3cret@host/0?dial_timeout=1s", want: "query parameters are not supported"},
		{url: "redis://:s3cret@host/0?", want: "query parameters are not supported"},
		{url: "redis://:s3cret@host/0#primary", want: "must not have a fragment"},
		{url: "redis://:s3cret@host/0#", want: "must not have a fragment"},
		{url: "redis://:s3/cret@host", want: "must percent-encode '/', '?' and '#'"},
		{url: "redis://:s3#cret@host", want: "must percent-encode '/', '?' and '#'"},
		{url: "redis://:s3%zzcret@host", want: "the user or password is not valid in a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := fleet.CheckURL(tt.url)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("CheckURL: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckURL accepted it; want an error with %q", tt.want)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) {
				t.Errorf("CheckURL = %q; want it to contain %q", msg, tt.want)
			}
			for _, part := range []string{secret, "s3", "cret", "zz"} {
				if strings.Contains(msg, part) {
					t.Errorf("CheckURL = %q: it shows the password (%q)", msg, part)
				}
			}
		})
	}
}

func TestNewRejectsABadURL(t *testing.T) {
	c, err := fleet.New(t.Context(), fleet.Options{URL: "redis://:s3cret@host/db"})
	if err == nil {
		c.Close()
		t.Fatal("New accepted a bad URL")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("New = %q: it shows the password", err)
	}
}
