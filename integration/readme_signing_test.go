package integration

import (
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeSigningRecipe runs README.md's signing recipe as written:
// keygen makes the key it names, the settings shown sign the pinned
// token's requests with it, the curl shown gets the signed key directory
// listing that key, and a request through the gate reaches the origin
// signed, its audit record naming the key.
func TestReadmeSigningRecipe(t *testing.T) {
	t.Parallel()
	readme := readFile(t, "README.md")
	section := readme[strings.Index(readme, "## Signing requests (Web Bot Auth)"):]
	section = strings.ReplaceAll(section[:strings.Index(section, "\n## ")], "\n", " ")
	keygen := regexp.MustCompile("`go run \\. keygen ([^ `]+)`").FindStringSubmatch(section)
	env := regexp.MustCompile("`((?:ROBOTSGATE_[A-Z_]+=[^ `]+ )+)go run \\.`").FindStringSubmatch(section)
	curl := regexp.MustCompile("`curl -H '(Host: [^']+)' http://127\\.0\\.0\\.1:8080(/[^ `]+)`").FindStringSubmatch(section)
	if keygen == nil || env == nil || curl == nil {
		t.Fatalf("README.md's signing recipe lacks `go run . keygen FILE`, `ROBOTSGATE_... go run .` or `curl -H 'Host: ...' URL`:\n%s", section)
	}
	file := filepath.Join(t.TempDir(), keygen[1])
	code, out, errOut := runBinary(t, "", nil, "keygen", file)
	keyid := regexp.MustCompile(`keyid (\S+)`).FindStringSubmatch(out)
	if code != 0 || keyid == nil {
		t.Fatalf("robotsgate keygen %s: exit %d, no key id printed\nstdout:\n%s\nstderr:\n%s", file, code, out, errOut)
	}
	settings := strings.Fields(strings.ReplaceAll(env[1], "="+keygen[1], "="+file))
	p := startProxy(t, settings...)

	req, err := http.NewRequest(http.MethodGet, p.url.String()+curl[2], nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = strings.TrimPrefix(curl[1], "Host: ")
	resp, err := directClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	body := string(data)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/http-message-signatures-directory+json" ||
		!strings.Contains(body, `"kid":"`+keyid[1]+`"`) || !strings.Contains(resp.Header.Get("Signature-Input"), `keyid="`+keyid[1]+`"`) {
		t.Fatalf("the recipe's curl got %d %q, Signature-Input %q:\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Signature-Input"), body)
	}

	o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt("User-agent: *\nDisallow: /private/\n")})
	if r := get(t, p.client(t), o.base()+"/", "curl/8.5.0"); r.status != http.StatusOK {
		t.Fatalf("a request through the gate got %d", r.status)
	}
	var signed http.Header
	for _, h := range o.received() {
		if h.Get("Signature") != "" {
			signed = h
		}
	}
	if signed == nil || !strings.Contains(signed.Get("Signature-Input"), `keyid="`+keyid[1]+`"`) {
		t.Fatalf("the origin got no request signed by %s: %v", keyid[1], o.received())
	}
	p.stop()
	var named bool
	for _, rec := range p.audit() {
		named = named || rec.raw["signature_keyid"] == keyid[1]
	}
	if !named {
		t.Errorf("no audit record names signature_keyid %s", keyid[1])
	}
}
