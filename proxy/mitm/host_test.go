package mitm

import (
	"errors"
	"strings"
	"testing"
)

func TestParseLeafHost(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	name253 := strings.Join([]string{label63, label63, label63, strings.Repeat("b", 61)}, ".")
	tests := []struct {
		in     string
		want   string // canonical name; empty means the input must be rejected
		wantIP bool
	}{
		{in: "example.com", want: "example.com"},
		{in: "WWW.Example.COM", want: "www.example.com"},
		{in: "example.com.", want: "example.com"},
		{in: "localhost", want: "localhost"},
		{in: "xn--bcher-kva.example", want: "xn--bcher-kva.example"},
		{in: "under_score.example.com", want: "under_score.example.com"},
		{in: "a-b.c-d.test", want: "a-b.c-d.test"},
		{in: "3com.com", want: "3com.com"},
		{in: name253, want: name253},
		{in: name253 + ".", want: name253},
		{in: "192.0.2.1", want: "192.0.2.1", wantIP: true},
		{in: "2001:DB8::1", want: "2001:db8::1", wantIP: true},
		{in: "2001:db8:0:0:0:0:0:1", want: "2001:db8::1", wantIP: true},
		{in: "::ffff:192.0.2.1", want: "192.0.2.1", wantIP: true},
		{in: ""},
		{in: "."},
		{in: ".."},
		{in: "a..b"},
		{in: ".example.com"},
		{in: "*.example.com"},
		{in: "exa mple.com"},
		{in: "example.com/path"},
		{in: "example.com:443"},
		{in: "user@example.com"},
		{in: "bücher.example"},
		{in: "nul\x00.example"},
		{in: "line\nbreak.example"},
		{in: strings.Repeat("a", 64) + ".example"},
		{in: name253 + "c"},
		{in: "fe80::1%eth0"},
		{in: "1.2.3"},
		{in: "256.1.1.1"},
		{in: "[::1]"},
	}
	for _, tt := range tests {
		got, err := parseLeafHost(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("parseLeafHost(%q) = %q, want an error", tt.in, got.name)
			} else if !errors.Is(err, ErrInvalidHost) {
				t.Errorf("parseLeafHost(%q) error %v does not wrap ErrInvalidHost", tt.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseLeafHost(%q): %v", tt.in, err)
			continue
		}
		if got.name != tt.want || got.addr.IsValid() != tt.wantIP {
			t.Errorf("parseLeafHost(%q) = %q (IP %v), want %q (IP %v)", tt.in, got.name, got.addr.IsValid(), tt.want, tt.wantIP)
		}
	}
}

func TestHostFromConnect(t *testing.T) {
	tests := []struct {
		target string
		want   string // empty means an error
	}{
		{target: "example.com:443", want: "example.com"},
		{target: "Example.COM.:8443", want: "example.com"},
		{target: "example.com", want: "example.com"},
		{target: "192.0.2.1:443", want: "192.0.2.1"},
		{target: "[2001:db8::1]:443", want: "2001:db8::1"},
		{target: "[2001:db8::1]", want: "2001:db8::1"},
		{target: ""},
		{target: ":443"},
		{target: "bad host:443"},
		{target: "[fe80::1%25eth0]:443"},
	}
	for _, tt := range tests {
		got, err := hostFromConnect(tt.target)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("hostFromConnect(%q) = %q, want an error", tt.target, got.name)
		case tt.want != "" && err != nil:
			t.Errorf("hostFromConnect(%q): %v", tt.target, err)
		case got.name != tt.want:
			t.Errorf("hostFromConnect(%q) = %q, want %q", tt.target, got.name, tt.want)
		}
	}
}

func TestErrorClipsLongHost(t *testing.T) {
	// Short enough overall to be quoted, with a label over 63 bytes.
	long := strings.Repeat("x", 240) + ".test"
	_, err := parseLeafHost(long)
	if err == nil {
		t.Fatal("accepted a 240-byte label")
	}
	if len(err.Error()) > 200 {
		t.Errorf("error message is %d bytes; an untrusted name should be clipped", len(err.Error()))
	}
}
