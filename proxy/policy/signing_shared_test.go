package policy

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"robotsgate/proxy/signing"
)

// TestKeySharedByUsersRefused: two users naming the same key file (a
// copy-paste slip) are refused: each one's requests would verify as the
// other's, under both Signature-Agents' directories.
func TestKeySharedByUsersRefused(t *testing.T) {
	dir := t.TempDir()
	k, err := signing.GenerateKey(nil, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	pem, _ := k.MarshalPEM()
	if err := os.WriteFile(filepath.Join(dir, "k.pem"), pem, 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := "crawlers:\n  - user: acme\n    signing_keys: [k.pem]\n    signature_agent: https://acme.example\n" +
		"  - user: beta\n    signing_keys: [k.pem]\n    signature_agent: https://beta.example\n"
	if _, err := Parse(filepath.Join(dir, "p.yaml"), []byte(yaml)); err == nil {
		t.Error("two users share one signing key, and the policy loads")
	}
}
