package integration

import (
	"net/http"
	"strings"
	"testing"
)

// TestRobotsTxtExemption: only a GET or HEAD of exactly /robots.txt passes
// whatever robots.txt says, unpaced. Every other request to that path (a
// method that changes something, a query, a body) is judged and paced like
// any URL, plainly and inside a tunnel.
func TestRobotsTxtExemption(t *testing.T) {
	t.Parallel()
	plain, secure := newRecorder(t, false), newRecorder(t, true)
	p := startProxy(t, upstreamCA(t, &origin{Server: secure.Server}))
	const gptbot = "Mozilla/5.0 (compatible; GPTBot/1.0; +https://openai.com/gptbot)" // Disallow: / in hostileRobots

	rows := []struct {
		name   string
		raw    string // "host" is replaced by the origin's address
		status int
	}{
		{"GET", "GET /robots.txt HTTP/1.1\r\nHost: host\r\n\r\n", 200},
		{"HEAD", "HEAD /robots.txt HTTP/1.1\r\nHost: host\r\n\r\n", 200},
		{"GET with a query", "GET /robots.txt?x=1 HTTP/1.1\r\nHost: host\r\n\r\n", 403},
		{"GET with an empty query", "GET /robots.txt? HTTP/1.1\r\nHost: host\r\n\r\n", 403},
		{"POST with a body", "POST /robots.txt HTTP/1.1\r\nHost: host\r\nContent-Length: 5\r\n\r\nhello", 403},
		{"PUT", "PUT /robots.txt HTTP/1.1\r\nHost: host\r\nContent-Length: 2\r\n\r\nno", 403},
		{"DELETE", "DELETE /robots.txt HTTP/1.1\r\nHost: host\r\n\r\n", 403},
		{"GET with a body", "GET /robots.txt HTTP/1.1\r\nHost: host\r\nContent-Length: 4\r\n\r\nbody", 403},
		{"another spelling", "GET /robots%2Etxt HTTP/1.1\r\nHost: host\r\n\r\n", 403},
		{"a reading of it", "GET /x/../robots.txt HTTP/1.1\r\nHost: host\r\n\r\n", 403},
		{"GET overridden to DELETE", "GET /robots.txt HTTP/1.1\r\nHost: host\r\nX-HTTP-Method-Override: DELETE\r\n\r\n", 200},
	}
	for _, tunnel := range []bool{false, true} {
		o := plain
		if tunnel {
			o = secure
		}
		for _, row := range rows {
			t.Run(map[bool]string{false: "plain", true: "tunnel"}[tunnel]+"/"+row.name, func(t *testing.T) {
				raw := strings.Replace(row.raw, "Host: host", "Host: "+o.addr+"\r\nUser-Agent: "+gptbot, 1)
				var r reply
				if tunnel {
					r, _ = exchange(t, p.intercept(t, o.addr, gptbot), raw, false)
				} else {
					method, rest, _ := strings.Cut(raw, " ")
					r, _ = exchange(t, p.dial(t), method+" http://"+o.addr+rest, false)
				}
				if r.status != row.status {
					t.Fatalf("status %d, want %d; body %q", r.status, row.status, clip(string(r.body)))
				}
			})
		}
		// Only the exempt GET and HEAD, and robotsgate's own fetch,
		// reached the origin; the override header did not.
		var got []string
		for _, r := range o.requests() {
			if r.RequestURI != "/robots.txt" || r.Method != http.MethodGet && r.Method != http.MethodHead {
				got = append(got, r.Method+" "+r.RequestURI)
			}
			if v := r.Header.Get("X-HTTP-Method-Override"); v != "" {
				t.Errorf("the origin received X-HTTP-Method-Override: %s", v)
			}
		}
		if len(got) > 0 {
			t.Errorf("tunnel %v: the origin received %q; want only GET and HEAD of /robots.txt", tunnel, got)
		}
	}
}

// TestRobotsTxtQueryIsPaced: /robots.txt?1, ?2, ... are URLs like any
// other, so they keep the Crawl-delay; the exact /robots.txt does not wait.
func TestRobotsTxtQueryIsPaced(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, false, map[string]http.HandlerFunc{
		"/robots.txt": robotsTxt("User-agent: *\nCrawl-delay: 30\n"),
	})
	p := startProxy(t)
	client := p.client(t)
	if r := get(t, client, o.base()+"/robots.txt?1", crawlerUA); r.status != http.StatusOK {
		t.Fatalf("first /robots.txt?1: status %d, want 200", r.status)
	}
	for _, target := range []string{"/robots.txt?2", "/robots.txt?3", "/page"} {
		if r := get(t, client, o.base()+target, crawlerUA); r.status != http.StatusTooManyRequests {
			t.Errorf("%s right after /robots.txt?1: status %d, want 429", target, r.status)
		}
	}
	for range 3 {
		if r := get(t, client, o.base()+"/robots.txt", crawlerUA); r.status != http.StatusOK {
			t.Errorf("/robots.txt within the delay: status %d, want 200 (never paced)", r.status)
		}
	}
}

// TestRewritingFieldsRemoved: fields that front ends and frameworks read
// as the request's real path, method, host, scheme or client never reach
// the origin, whatever their case or '_' spelling; other fields do.
func TestRewritingFieldsRemoved(t *testing.T) {
	t.Parallel()
	plain := newRecorder(t, false)
	p := startProxy(t)
	removed := []string{
		"X-Original-URL: /private/x", "X-Rewrite-URL: /private/x", "X-Original-URI: /private/x",
		"X-Override-URL: /private/x", "X-Envoy-Original-Path: /private/x",
		"X-HTTP-Method-Override: DELETE", "X-HTTP-Method: DELETE", "X-Method-Override: DELETE",
		"Forwarded: for=10.0.0.1;host=internal", "X-Forwarded-For: 10.0.0.1", "X-Forwarded-Host: internal",
		"X-Forwarded-Proto: https", "X-Forwarded-Prefix: /private", "X-Forwarded-Uri: /private/x",
		"X-Forwarded-Path: /private/x", "X-Forwarded-Port: 8443", "X-Forwarded-Server: internal",
		"X-Forwarded-Scheme: https", "X-Forwarded-Ssl: on", "X-Host: internal", "X-Original-Host: internal",
		"X-Real-IP: 10.0.0.1", "True-Client-IP: 10.0.0.1", "X-Client-IP: 10.0.0.1", "CF-Connecting-IP: 10.0.0.1",
		"Proxy-Url: http://internal/", "X_Original_URL: /private/x", "x-forwarded_for: 10.0.0.1",
		"X-Script-Name: /private", "Front-End-Https: on",
	}
	raw := "GET http://" + plain.addr + "/open/fields HTTP/1.1\r\nHost: " + plain.addr + "\r\nUser-Agent: " + crawlerUA +
		"\r\n" + strings.Join(removed, "\r\n") + "\r\nX-End-To-End: kept\r\nX-Forwarded: no\r\n\r\n"
	if r, _ := exchange(t, p.dial(t), raw, false); r.status != http.StatusOK {
		t.Fatalf("status %d, want 200; body %q", r.status, clip(string(r.body)))
	}
	got := plain.request(t, "/open/fields").Header
	for _, line := range removed {
		name, _, _ := strings.Cut(line, ":")
		if v := got.Values(name); len(v) > 0 {
			t.Errorf("the origin received %s: %q", name, v)
		}
	}
	for name := range got {
		if n := strings.ToLower(name); strings.Contains(n, "forward") || strings.Contains(n, "original") {
			t.Errorf("the origin received %s", name)
		}
	}
	if got.Get("X-End-To-End") != "kept" {
		t.Errorf("X-End-To-End %q, want kept", got.Get("X-End-To-End"))
	}
	if got.Get("User-Agent") != crawlerUA || got.Get("Via") != "1.1 robotsgate" {
		t.Errorf("the origin received User-Agent %q and Via %q; want the client's and robotsgate's", got.Get("User-Agent"), got.Get("Via"))
	}
}
