package robots

import (
	"net/url"
	"testing"
)

func TestOriginOf(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://example.com", "https://example.com"},
		{"https://Example.COM/robots.txt?x=1#top", "https://example.com"},
		{"HTTPS://example.com/", "https://example.com"},
		{"http://example.com:80/page", "http://example.com"},
		{"https://example.com:443", "https://example.com"},
		{"http://example.com:443", "http://example.com:443"},
		{"https://example.com:80", "https://example.com:80"},
		{"https://example.com:8443/", "https://example.com:8443"},
		{"http://example.com:0080", "http://example.com"},
		{"http://example.com:08080", "http://example.com:8080"},
		{"http://example.com:/", "http://example.com"},
		{"http://127.0.0.1:8080/x", "http://127.0.0.1:8080"},
		{"http://[::1]:8080/", "http://[::1]:8080"},
		{"http://[2001:DB8::1]/", "http://[2001:db8::1]"},
		{"https://[2001:db8::1]:443", "https://[2001:db8::1]"},
		{"http://[fe80::1%25eth0]:8080/", "http://[fe80::1%25eth0]:8080"},
		{"https://user:secret@example.com/private", "https://example.com"},
		{"http://a.b.example.com./", "http://a.b.example.com."},
	} {
		got, err := OriginOf(c.in)
		if err != nil || got != c.want {
			t.Errorf("OriginOf(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
		// The result is a fixed point: canonical means canonical.
		if again, err := OriginOf(got); err != nil || again != got {
			t.Errorf("OriginOf(%q) = %q, %v; not canonical", got, again, err)
		}
	}
	for _, in := range []string{
		"",
		"example.com",
		"/robots.txt",
		"ftp://example.com/",
		"mailto:someone@example.com",
		"file:///etc/passwd",
		"http://",
		"http:///robots.txt",
		"https://:443/",
		"http:example.com",
		"http://exa mple.com/",
		"http://example.com:99999/",
		"http://example.com:0/",
		"http://example.com:http/",
		"http://[::1/",
	} {
		if got, err := OriginOf(in); err == nil {
			t.Errorf("OriginOf(%q) = %q, want an error", in, got)
		}
	}
}

func TestOriginFromURL(t *testing.T) {
	// A proxy hands over the URL of a request it received.
	u := &url.URL{Scheme: "http", Host: "EXAMPLE.com:80", Path: "/a", User: url.UserPassword("u", "p")}
	if got, err := OriginFromURL(u); err != nil || got != "http://example.com" {
		t.Errorf("OriginFromURL(%v) = %q, %v", u, got, err)
	}
	if got, err := OriginFromURL(nil); err == nil {
		t.Errorf("OriginFromURL(nil) = %q, want an error", got)
	}
	if got, err := OriginFromURL(&url.URL{Path: "/robots.txt"}); err == nil {
		t.Errorf("OriginFromURL(path only) = %q, want an error", got)
	}
}
