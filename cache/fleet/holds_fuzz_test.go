package fleet

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzDecodeHoldMessage feeds decodeHoldMessage what anyone may publish on
// the holds channel: it must never panic, must keep within MaxHoldBytes,
// and what it accepts must be what encodeHoldMessage writes.
func FuzzDecodeHoldMessage(f *testing.F) {
	f.Add("v1:23:https://example.com:443\x00\x01state")
	f.Add("v1:1:g")
	f.Add("v1:0:")
	f.Add("v1:4096:" + strings.Repeat("g", 4096))
	f.Add("v1:-1:g")
	f.Add("v1:99999:g")
	f.Add("garbage")
	f.Fuzz(func(t *testing.T, msg string) {
		group, state, ok := decodeHoldMessage(msg)
		if !ok {
			return
		}
		if group == "" || len(group) > MaxHoldBytes || len(state) > MaxHoldBytes {
			t.Fatalf("decodeHoldMessage(%q) accepted a group of %d bytes, a state of %d", msg, len(group), len(state))
		}
		if again := encodeHoldMessage(group, state); string(again) != msg {
			t.Errorf("decodeHoldMessage(%q) = %q, %q, which encode as %q", msg, group, state, again)
		}
	})
}

// FuzzHoldMessageRoundTrip: every group and state Store accepts comes back
// from the message it publishes.
func FuzzHoldMessageRoundTrip(f *testing.F) {
	f.Add("https://example.com:443", []byte{0, 1, 2})
	f.Add("address:127.0.0.1", []byte("v1:3:abc"))
	f.Add("a:b:c", []byte{})
	f.Fuzz(func(t *testing.T, group string, state []byte) {
		if checkGroup(group) != nil || len(state) > MaxHoldBytes {
			return
		}
		g, s, ok := decodeHoldMessage(string(encodeHoldMessage(group, state)))
		if !ok || g != group || !bytes.Equal(s, state) {
			t.Errorf("round trip of %q, %q = %q, %q, %v", group, state, g, s, ok)
		}
	})
}

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1", 1, true},
		{"1764150000000000", 1764150000000000, true},
		{"9007199254740991", 1<<53 - 1, true},
		{"9007199254740992", 0, false},
		{"9007199254740993", 0, false},
		{"0", 0, false},
		{"", 0, false},
		{"01", 0, false},
		{"+1", 0, false},
		{"-1", 0, false},
		{"1e3", 0, false},
		{" 1", 0, false},
		{"99999999999999999", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseVersion(tt.in)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("parseVersion(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
