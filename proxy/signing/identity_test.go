package signing

import (
	"strings"
	"testing"
	"time"
)

func TestNormalAuthority(t *testing.T) {
	for in, want := range map[string]string{
		"Example.COM": "example.com", "example.com:443": "example.com", "example.com:80": "example.com",
		"example.com:8443": "example.com:8443", "[::1]:443": "[::1]", "127.0.0.1:8080": "127.0.0.1:8080",
	} {
		if got := NormalAuthority(in); got != want {
			t.Errorf("NormalAuthority(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAgentHost: the host a directory request names for an agent.
func TestAgentHost(t *testing.T) {
	k, err := GenerateKey(nil, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for agent, want := range map[string]string{
		"https://Bot.Example": "bot.example", "https://bot.example:443/": "bot.example", "http://127.0.0.1:8080": "127.0.0.1:8080",
	} {
		id, err := NewIdentity("token X", agent, []*Key{k})
		if err != nil {
			t.Fatal(err)
		}
		if got := id.AgentHost(); got != want {
			t.Errorf("AgentHost of %s = %q, want %q", agent, got, want)
		}
	}
}

// TestIdentityKeysBounded: more than MaxKeys keys are refused, naming
// the bound.
func TestIdentityKeysBounded(t *testing.T) {
	var keys []*Key
	for range MaxKeys + 1 {
		k, err := GenerateKey(nil, time.Time{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if _, err := NewIdentity("user acme", "https://acme.example", keys[:MaxKeys]); err != nil {
		t.Errorf("%d keys: %v", MaxKeys, err)
	}
	_, err := NewIdentity("user acme", "https://acme.example", keys)
	if want := "user acme has 17 signing keys; at most 16"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%d keys: error %v, want %q", len(keys), err, want)
	}
}
