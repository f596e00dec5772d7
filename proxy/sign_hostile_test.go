package proxy

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"robotsgate/proxy/pace"
	"robotsgate/proxy/signing"
)

// signingTestIdentity is a pinned identity "token MyBot" with one key valid
// from notBefore (zero: always).
func signingTestIdentity(t *testing.T, notBefore time.Time) *signing.Identity {
	t.Helper()
	k, err := signing.GenerateKey(nil, notBefore, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := signing.NewIdentity("token MyBot", "https://mybot.example", []*signing.Key{k})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// headerOrigin is an origin that keeps the header of each request to
// /h/... it serves.
type headerOrigin struct {
	*origin
	mu   sync.Mutex
	seen map[string]http.Header
}

func startHeaderOrigin(t *testing.T, robots string) *headerOrigin {
	o := &headerOrigin{origin: startOrigin(t, originConfig{robots: robots}), seen: map[string]http.Header{}}
	o.mux.HandleFunc("/h/", func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.seen[r.URL.Path] = r.Header.Clone()
		o.mu.Unlock()
		w.Write([]byte("ok\n"))
	})
	return o
}

func (o *headerOrigin) header(path string) http.Header {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen[path]
}

// cgiName is a field's name as CGI, PHP, WSGI (wsgiref, Werkzeug) and
// Rack give it to an application: '-' and '_' alike, any case.
func cgiName(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// TestClientSignatureFieldsAnySpelling: a client's signature fields spelt
// with '_', which a CGI/WSGI/Rack application reads as Signature-Input and
// Signature-Agent (HTTP_SIGNATURE_INPUT...), never reach the origin,
// signed request or not.
func TestClientSignatureFieldsAnySpelling(t *testing.T) {
	o := startHeaderOrigin(t, testRobots)
	p := startProxy(t, proxyConfig{signing: SigningOptions{Pinned: signingTestIdentity(t, time.Time{}), Token: "MyBot"}})
	for _, tc := range []struct{ path, ua string }{
		{"/h/signed", "MyBot/1.0"},    // signed by the gate
		{"/h/unsigned", "OtherBot/1"}, // no identity: sent unsigned
	} {
		h := http.Header{
			"User-Agent":      {tc.ua},
			"Signature_Input": {`sig1=("@authority");created=1;keyid="bot";tag="web-bot-auth"`},
			"Signature_Agent": {`sig1="https://evil.example"`},
		}
		if resp, body := do(t, p.client(), "GET", o.URL+tc.path, h); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tc.path, resp.StatusCode, body)
		}
		got := o.header(tc.path)
		for name, values := range got {
			switch cgiName(name) {
			case "SIGNATURE", "SIGNATURE_INPUT", "SIGNATURE_AGENT":
				if name != signing.FieldSignature && name != signing.FieldSignatureInput && name != signing.FieldSignatureAgent {
					t.Errorf("%s: the origin got the client's %s: %q (an application reads it as HTTP_%s)", tc.path, name, values, cgiName(name))
				}
			}
		}
	}
}

// TestAuditModeSendsUnsigned: in ROBOTSGATE_MODE=audit a request
// robots.txt disallows is forwarded unsigned: the signature, the
// compliance claim, is never put on a request the gate judged
// non-compliant.
func TestAuditModeSendsUnsigned(t *testing.T) {
	o := startHeaderOrigin(t, "User-agent: *\nDisallow: /h/private\n")
	p := startProxy(t, proxyConfig{mode: ModeAudit, signing: SigningOptions{Pinned: signingTestIdentity(t, time.Time{}), Token: "MyBot"}})
	resp, body := do(t, p.client(), "GET", o.URL+"/h/private", ua("MyBot/1.0"))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if got := o.header("/h/private").Get(signing.FieldSignature); got != "" {
		t.Errorf("a request robots.txt disallows was forwarded (audit mode) signed as token MyBot: Signature %q", got)
	}
	if rec := recordFor(t, p.records(), "GET", o.URL+"/h/private"); rec.Verdict != "disallow" || rec.SignatureKeyID != "" {
		t.Errorf("record: verdict %q, signature_keyid %q", rec.Verdict, rec.SignatureKeyID)
	}
}

// TestPaceAuditSendsTooEarlyUnsigned: with ROBOTSGATE_CRAWL_DELAY=audit
// a request too early is forwarded, unsigned; the one on time is signed.
func TestPaceAuditSendsTooEarlyUnsigned(t *testing.T) {
	o := startHeaderOrigin(t, pacedRobots)
	p := pacedProxy(t, pace.ModeAudit, proxyConfig{signing: SigningOptions{Pinned: signingTestIdentity(t, time.Time{}), Token: "MyBot"}})
	c := p.client()
	for _, path := range []string{"/h/first", "/h/second"} {
		if resp, body := do(t, c, "GET", o.URL+path, ua("MyBot/1.0")); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
	if o.header("/h/first").Get(signing.FieldSignature) == "" {
		t.Error("the request on time was not signed")
	}
	if got := o.header("/h/second").Get(signing.FieldSignature); got != "" {
		t.Errorf("a request too early, forwarded in audit, was signed: %q", got)
	}
}

// TestSigningFailureGivesPaceSlotBack: a request refused 503 for want of a
// valid key never reached the origin, so its pace slot is given back: the
// identity's next request gets 503 again, not 429 (or, in wait mode, a
// hold of the whole Crawl-delay) for a request never sent.
func TestSigningFailureGivesPaceSlotBack(t *testing.T) {
	o := startOrigin(t, originConfig{robots: pacedRobots})
	id := signingTestIdentity(t, time.Now().Add(time.Hour)) // valid in an hour only
	p := pacedProxy(t, pace.ModeEnforce, proxyConfig{signing: SigningOptions{Pinned: id, Token: "MyBot"}})
	c := p.client()
	resp, body := do(t, c, "GET", o.URL+"/a", ua("MyBot/1.0"))
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("first request: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, c, "GET", o.URL+"/b", ua("MyBot/1.0"))
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("second request: %d, want 503 again (the first never reached the origin, so it used no slot): %s",
			resp.StatusCode, resp.Header.Get(decisionHeader))
	}
	if o.saw("/a") || o.saw("/b") {
		t.Error("an unsigned request reached the origin")
	}
}

// TestUnsignedAnswerJSON: a client that accepts only JSON gets the 503 of
// a request not sent for want of a valid key in JSON, naming the identity
// and why, with Retry-After for the key valid later.
func TestUnsignedAnswerJSON(t *testing.T) {
	o := startOrigin(t, originConfig{robots: testRobots})
	p := startProxy(t, proxyConfig{signing: SigningOptions{Pinned: signingTestIdentity(t, time.Now().Add(time.Hour)), Token: "MyBot"}})
	resp, body := do(t, p.client(), "GET", o.URL+"/a", http.Header{"User-Agent": {"MyBot/1.0"}, "Accept": {"application/json"}})
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("%d %q, Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Retry-After"), body)
	}
	var got struct {
		Status   int    `json:"status"`
		Token    string `json:"token"`
		Identity string `json:"identity"`
		Error    string `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if got.Status != 503 || got.Token != "MyBot" || got.Identity != "token MyBot" || !strings.Contains(got.Error, "no valid signing key for token MyBot") {
		t.Errorf("JSON %+v", got)
	}
	if o.saw("/a") {
		t.Error("the request reached the origin unsigned")
	}
}
