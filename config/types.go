package config

import (
	"fmt"
	"math"
	"math/bits"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
)

// LogFormat is the encoding of the operational log.
type LogFormat string

const (
	// LogFormatAuto is coloured text on a terminal and JSON otherwise.
	LogFormatAuto LogFormat = "auto"
	// LogFormatText is human-readable text.
	LogFormatText LogFormat = "text"
	// LogFormatJSON is one JSON object per line.
	LogFormatJSON LogFormat = "json"
)

// UnmarshalText accepts "auto", "text" or "json" in any case.
func (f *LogFormat) UnmarshalText(text []byte) error {
	switch v := LogFormat(strings.ToLower(string(text))); v {
	case LogFormatAuto, LogFormatText, LogFormatJSON:
		*f = v
		return nil
	}
	return fmt.Errorf("%q is not valid; use %q, %q or %q", text, LogFormatAuto, LogFormatText, LogFormatJSON)
}

// RobotsAuthStatus is what a 401 or 403 answer to a robots.txt fetch means.
type RobotsAuthStatus string

const (
	// RobotsAuthAllow follows RFC 9309 §2.3.1.3: the file is "unavailable",
	// so there are no restrictions.
	RobotsAuthAllow RobotsAuthStatus = "allow"
	// RobotsAuthDisallow follows the 1996 draft: access to robots.txt is
	// restricted, so the whole site is disallowed.
	RobotsAuthDisallow RobotsAuthStatus = "disallow"
)

// UnmarshalText accepts "allow" or "disallow" in any case.
func (s *RobotsAuthStatus) UnmarshalText(text []byte) error {
	switch v := RobotsAuthStatus(strings.ToLower(string(text))); v {
	case RobotsAuthAllow, RobotsAuthDisallow:
		*s = v
		return nil
	}
	return fmt.Errorf("%q is not valid; use %q (RFC 9309: no restrictions) or %q (1996 draft: complete disallow)",
		text, RobotsAuthAllow, RobotsAuthDisallow)
}

// DestinationList is a set of address ranges, written as comma-separated
// CIDRs ("169.254.0.0/16") or single addresses ("10.0.0.1", meaning /32 or
// /128), or "none" for the empty set.
type DestinationList []netip.Prefix

// UnmarshalText parses the list; every bad entry is named.
func (l *DestinationList) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	if strings.EqualFold(s, "none") {
		*l = DestinationList{}
		return nil
	}
	var list DestinationList
	var bad []string
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if prefix, err := netip.ParsePrefix(entry); err == nil {
			list = append(list, prefix.Masked())
		} else if addr, err := netip.ParseAddr(entry); err == nil && addr.Zone() == "" {
			list = append(list, netip.PrefixFrom(addr, addr.BitLen()))
		} else {
			bad = append(bad, strconv.Quote(entry))
		}
	}
	switch {
	case len(bad) == 1:
		return fmt.Errorf("%s is not a CIDR or an IP address; use e.g. \"169.254.0.0/16,10.0.0.0/8\", or \"none\"", bad[0])
	case len(bad) > 1:
		return fmt.Errorf("%s are not CIDRs or IP addresses; use e.g. \"169.254.0.0/16,10.0.0.0/8\", or \"none\"", strings.Join(bad, ", "))
	case len(list) == 0:
		return fmt.Errorf("%q names no range; use e.g. \"169.254.0.0/16\", or \"none\" to deny nothing", s)
	}
	*l = list
	return nil
}

// String lists the ranges as they are written in configuration.
func (l DestinationList) String() string {
	if len(l) == 0 {
		return "none"
	}
	parts := make([]string, len(l))
	for i, p := range l {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}

// PurposeList is a crawler's purposes, written comma-separated: "search",
// "ai-train,ai-input". Each is a lower-case word, as in the policy file.
type PurposeList []string

// UnmarshalText parses the list; a bad purpose is named.
func (l *PurposeList) UnmarshalText(text []byte) error {
	var list PurposeList
	for p := range strings.SplitSeq(string(text), ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !isPurpose(p) {
			return fmt.Errorf("%q is not a purpose: a lower-case word of letters, digits and '-', such as search, ai-train or ai-input", p)
		}
		if !slices.Contains(list, p) {
			list = append(list, p)
		}
	}
	*l = list
	return nil
}

// String lists the purposes as they are written in configuration.
func (l PurposeList) String() string { return strings.Join(l, ",") }

// isPurpose reports a lower-case word of letters, digits and '-', at most
// 64 bytes.
func isPurpose(s string) bool {
	if len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// FileList is a list of file paths, written comma-separated.
type FileList []string

// UnmarshalText parses the list, dropping empty entries.
func (l *FileList) UnmarshalText(text []byte) error {
	var list FileList
	for f := range strings.SplitSeq(string(text), ",") {
		if f = strings.TrimSpace(f); f != "" {
			list = append(list, f)
		}
	}
	*l = list
	return nil
}

// String lists the files as they are written in configuration.
func (l FileList) String() string { return strings.Join(l, ",") }

// ByteSize is a number of bytes, written in configuration as a plain integer
// or with a unit: "512000", "500KiB", "64 MiB", "1.5MB".
type ByteSize int64

// Sizes in bytes, for readable comparisons.
const (
	KiB ByteSize = 1 << 10 // kibibyte
	MiB ByteSize = 1 << 20 // mebibyte
)

// UnmarshalText parses a plain integer (bytes) or a number with an IEC
// (KiB, MiB, ...) or SI (kB, MB, ...) unit, in any case, with or without a
// space. A fraction of a byte is dropped.
func (b *ByteSize) UnmarshalText(text []byte) error {
	s := string(text)
	notSize := fmt.Errorf(`%q is not a size; use bytes ("512000") or a number with a unit ("500KiB", "64MiB", "1.5MB")`, s)
	tooLarge := fmt.Errorf("%q is too large; use at most %s", s, ByteSize(math.MaxInt64))

	// Whole numbers are computed exactly; go-humanize goes through float64,
	// which would round sizes above 2^53.
	num := s[:len(s)-len(strings.TrimLeft(s, "0123456789"))]
	if unit := s[len(num):]; num != "" && !strings.HasPrefix(unit, ".") && !strings.HasPrefix(unit, ",") {
		multiple, err := humanize.ParseBytes("1" + unit)
		if err != nil {
			return notSize
		}
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil {
			return tooLarge // only digits, so the error is its range
		}
		hi, lo := bits.Mul64(n, multiple)
		if hi != 0 || lo > math.MaxInt64 {
			return tooLarge
		}
		*b = ByteSize(lo)
		return nil
	}
	n, err := humanize.ParseBytes(s)
	switch {
	case err != nil:
		return notSize
	case n > math.MaxInt64:
		return tooLarge
	}
	*b = ByteSize(n)
	return nil
}

// units are the multiples String can print a size in.
var units = [...]struct {
	size int64
	name string
}{
	{1 << 60, "EiB"}, {1 << 50, "PiB"}, {1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"},
	{1e18, "EB"}, {1e15, "PB"}, {1e12, "TB"}, {1e9, "GB"}, {1e6, "MB"}, {1e3, "kB"},
}

// String prints the size exactly, so that it parses back to itself, with
// the unit that divides it into the smallest whole number: "500 KiB",
// "64 MiB", "2 GB", "1500 kB", "12345 B".
func (b ByteSize) String() string {
	n, unit := int64(b), "B"
	if b > 0 {
		for _, u := range units {
			if int64(b)%u.size == 0 && int64(b)/u.size < n {
				n, unit = int64(b)/u.size, u.name
			}
		}
	}
	return strconv.FormatInt(n, 10) + " " + unit
}
