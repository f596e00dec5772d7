package config

import (
	"math"
	"strings"
	"testing"
)

func TestByteSizeUnmarshalText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want ByteSize
	}{
		{"0", 0},
		{"512000", 512000},
		{"9007199254740993", 9007199254740993}, // 2^53+1: exact, not rounded through float64
		{"9223372036854775807", math.MaxInt64},
		{"500KiB", 500 * 1024},
		{"500 KiB", 500 * 1024},
		{"500kib", 500 * 1024},
		{"500KB", 500_000},
		{"500 kB", 500_000},
		{"64MiB", 64 << 20},
		{"1.5MB", 1_500_000},
		{"1.5MiB", 1536 << 10},
		{"2G", 2_000_000_000},
		{"2Gi", 2 << 30},
		{"1 EiB", 1 << 60},
		{"12 B", 12},
		{"1,000", 1000},
		{"0.5KiB", 512},
		{"1.9", 1}, // a fraction of a byte is dropped
		{"9223372036854775807 B", math.MaxInt64},
		{"8191 PiB", 8191 << 50},
	}
	for _, tt := range tests {
		var got ByteSize
		if err := got.UnmarshalText([]byte(tt.in)); err != nil {
			t.Errorf("UnmarshalText(%q) = %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("UnmarshalText(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestByteSizeUnmarshalTextRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string
	}{
		{"", `"" is not a size`},
		{"big", `"big" is not a size`},
		{"-1", `"-1" is not a size`},
		{"-1KiB", `"-1KiB" is not a size`},
		{"5 parsecs", `"5 parsecs" is not a size`},
		{" 5KiB", `" 5KiB" is not a size`},
		{"1e6", `"1e6" is not a size`},
		{"8EiB", `"8EiB" is too large`},
		{"100EB", `"100EB" is too large`},
		{"9223372036854775808", `"9223372036854775808" is too large`},
		{"18446744073709551616", `"18446744073709551616" is too large`},
		{"9007199254740993 KiB", `"9007199254740993 KiB" is too large`},
		{"10000000000 EiB", `"10000000000 EiB" is too large`},
		{"1.5 parsecs", `"1.5 parsecs" is not a size`},
	}
	for _, tt := range tests {
		b := ByteSize(42)
		err := b.UnmarshalText([]byte(tt.in))
		if err == nil {
			t.Errorf("UnmarshalText(%q) = %d, want an error", tt.in, b)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("UnmarshalText(%q) error %q lacks %q", tt.in, err, tt.want)
		}
		if b != 42 {
			t.Errorf("UnmarshalText(%q) failed but changed the value to %d", tt.in, b)
		}
	}
}

func TestByteSizeString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   ByteSize
		want string
	}{
		{0, "0 B"},
		{1, "1 B"},
		{12345, "12345 B"},
		{1000, "1 kB"},
		{1024, "1 KiB"},
		{500 * KiB, "500 KiB"},
		{512000, "500 KiB"},
		{64 * MiB, "64 MiB"},
		{1_500_000, "1500 kB"},
		{1536 * KiB, "1536 KiB"},
		{3 << 30, "3 GiB"},
		{2_000_000_000, "2 GB"},
		{1 << 60, "1 EiB"},
		{math.MaxInt64, "9223372036854775807 B"},
		{-5, "-5 B"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("ByteSize(%d).String() = %q, want %q", int64(tt.in), got, tt.want)
		}
	}
}

// TestByteSizeStringRoundTrips checks that what String prints parses back to
// the same size, so a size can be copied from a message into configuration.
func TestByteSizeStringRoundTrips(t *testing.T) {
	t.Parallel()
	for _, b := range []ByteSize{0, 7, 999, 1000, 1023, 1024, 1025, 500 * KiB, 1_500_000, 64 * MiB, 3 << 40, 5e15, 1 << 62, math.MaxInt64} {
		var got ByteSize
		if err := got.UnmarshalText([]byte(b.String())); err != nil {
			t.Errorf("UnmarshalText(%q) = %v", b.String(), err)
		} else if got != b {
			t.Errorf("ByteSize(%d) prints %q, which parses to %d", int64(b), b.String(), int64(got))
		}
	}
}
