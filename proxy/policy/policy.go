// Package policy reads the operator's policy file (ROBOTSGATE_POLICY): a
// sandbox per crawler (the sites it may visit, extra rules, a pace floor,
// a bound on requests in flight, its purposes) and, per site, extra rules
// and exceptions that allow what robots.txt disallows, each with its
// reason.
//
// The file is YAML, read with the node API so that every error names the
// file and line ("policy.yaml:12: ..."); an unknown key is an error, since
// a typo must not silently widen a sandbox. It is compiled once for a
// lookup per request that allocates nothing: [Policy.Match] finds the
// entries that apply to a crawler and a host, and the [Match] says where
// the crawler may go ([Match.Destination]) and how robots.txt's verdict is
// changed ([Match.Judge]). Every [Finding] a request can get is built at
// load, so a decision points into the policy and copies nothing.
//
// Every crawler entry that matches applies, the strictest wins: a host
// must be in each matching entry's allow_sites and in none's deny_sites,
// every rule applies, the longest min_delay and the smallest
// max_concurrency hold, and the purposes add up.
//
// A user's entry may also give the user's signing identity (signing_keys,
// signature_agent): the keys its forwarded requests are signed with
// ([Match.Signer]), read when the file loads.
package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"robotsgate/proxy/signing"
)

// MaxFileBytes bounds the policy file: a larger one is refused, not read.
const MaxFileBytes = 8 << 20

// Kind says what part of the policy a Finding is.
type Kind uint8

const (
	// KindDestination: a crawler entry's allow_sites or deny_sites kept
	// the crawler from the site.
	KindDestination Kind = iota + 1
	// KindException: a site entry's exception allowed a path robots.txt
	// disallows.
	KindException
	// KindRule: a rule of the policy refused the path.
	KindRule
	// KindMinDelay: a crawler entry's min_delay.
	KindMinDelay
	// KindMaxConcurrency: a crawler entry's max_concurrency.
	KindMaxConcurrency
)

func (k Kind) String() string {
	switch k {
	case KindDestination:
		return "destination"
	case KindException:
		return "exception"
	case KindRule:
		return "rule"
	case KindMinDelay:
		return "min-delay"
	case KindMaxConcurrency:
		return "max-concurrency"
	}
	return "kind " + strconv.Itoa(int(k))
}

// Finding is the part of the policy that decided or shaped a request: a
// line of the file, what it says and why. Findings are built at load and
// shared: never modify one.
type Finding struct {
	// File is the policy file's path as it was loaded.
	File string
	// Line is the line of the file that decided.
	Line int
	Kind Kind
	// Rule is the line's text, or a summary of it: "Disallow: /shop/",
	// "allow: /reports/", "allow_sites: *.acme.example, acme-shop.example",
	// "min_delay: 2s".
	Rule string
	// Reason is the operator's reason when the file gives one, else an
	// explanation written at load; it may be empty for a rule.
	Reason string
}

// String renders the finding for a page or a log line: "policy.yaml line
// 12: rule: Disallow: /shop/ (asked by mail ...)". Only the file's base
// name is shown: a page goes to the crawler, the server's paths do not.
func (f *Finding) String() string {
	if f == nil {
		return ""
	}
	s := filepath.Base(f.File) + " line " + strconv.Itoa(f.Line) + ": " + f.Kind.String() + ": " + f.Rule
	if f.Reason != "" {
		s += " (" + f.Reason + ")"
	}
	return s
}

// Error is one error of a policy file, at a line (0 when the error has
// none, as some of the YAML parser's have not).
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return e.File + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
	}
	return e.File + ": " + e.Msg
}

// Policy is a loaded policy file. A nil *Policy applies nothing. It is
// never modified once loaded, so any number of requests may use it while
// a newer one is put in force.
type Policy struct {
	file    string
	version string
	notes   []string
	// blank: the file has no entry, and no list said empty on purpose.
	blank bool

	crawlers []*crawler
	sites    []*site
	// byUser keys crawler entries by credential name (exact), byToken by
	// lower-cased product token; every holds the "*" entries. Entries
	// appear in file order.
	byUser  map[string][]*crawler
	byToken map[string][]*crawler
	every   []*crawler
	// hostIndex finds the site entries naming a host (see siteIndex).
	hostIndex siteIndex
	// exceptions counts every site entry's exceptions, for Summary.
	exceptions int
	// identities are the users' signing identities, in file order.
	identities []*signing.Identity
}

// Load is LoadOptions with no Options.
func Load(path string) (*Policy, error) {
	return LoadOptions(path, Options{})
}

// LoadOptions reads and parses the policy file at path. Errors name the
// path and line; a file over MaxFileBytes is refused.
func LoadOptions(path string, opts Options) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("policy: read %s: %w", path, err)
	}
	return ParseOptions(path, data, opts)
}

// File is the path the policy was loaded from (the name given to Parse).
func (p *Policy) File() string {
	if p == nil {
		return ""
	}
	return p.file
}

// Version is the first 12 hexadecimal digits of the SHA-256 of the file's
// bytes: the same file has the same version on every instance of a fleet.
func (p *Policy) Version() string {
	if p == nil {
		return ""
	}
	return p.version
}

// Notes are sentences the loader should log as warnings: grants that an
// anonymous client can claim by naming a token, entries that do nothing,
// signing identities without a key valid now.
func (p *Policy) Notes() []string {
	if p == nil {
		return nil
	}
	return p.notes
}

// Summary says what the policy holds, for a log or `robotsgate config`:
// "4 crawler entries, 1 site entry, 1 exception", and ", 2 signing
// identities" when users have keys.
func (p *Policy) Summary() string {
	if p == nil {
		return "no policy"
	}
	s := fmt.Sprintf("%s, %s, %s",
		plural(len(p.crawlers), "crawler entry", "crawler entries"),
		plural(len(p.sites), "site entry", "site entries"),
		plural(p.exceptions, "exception", "exceptions"))
	if len(p.identities) > 0 {
		s += ", " + plural(len(p.identities), "signing identity", "signing identities")
	}
	return s
}

// Identities are the signing identities of the users with signing_keys,
// in file order: what the key directory publishes. The slice and the
// identities are the policy's own: never modify them.
func (p *Policy) Identities() []*signing.Identity {
	if p == nil {
		return nil
	}
	return p.identities
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// versionOf is the version of a file's bytes.
func versionOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// listText writes a list of patterns for a Finding's Rule: the first few,
// then how many more, so that a page stays short.
func listText(key string, items []string) string {
	const maxItems, maxBytes = 5, 200
	var b strings.Builder
	b.WriteString(key)
	b.WriteString(":")
	for i, item := range items {
		if i == maxItems || b.Len()+len(item) > maxBytes {
			fmt.Fprintf(&b, " … (%d more)", len(items)-i)
			break
		}
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(" ")
		b.WriteString(item)
	}
	if len(items) == 0 {
		b.WriteString(" []")
	}
	return b.String()
}

// PaceBound returns the first min_delay or max_concurrency of a crawler
// entry, nil for none: a proxy that paces nothing does not keep them, and
// says so.
func (p *Policy) PaceBound() *Finding {
	if p == nil {
		return nil
	}
	for _, c := range p.crawlers {
		if c.minDelayFinding != nil {
			return c.minDelayFinding
		}
		if c.maxConcFinding != nil {
			return c.maxConcFinding
		}
	}
	return nil
}

// NamesUsers reports whether an entry names a credential's user: a crawler
// entry's user, or a site entry's users. Such an entry binds only clients
// that authenticate; a proxy that lets clients through without a
// credential says so.
func (p *Policy) NamesUsers() bool {
	if p == nil {
		return false
	}
	if len(p.byUser) > 0 {
		return true
	}
	for _, s := range p.sites {
		if len(s.users) > 0 {
			return true
		}
	}
	return false
}

// Blank reports whether the file holds no entry, and no list said empty
// on purpose (`crawlers: []`): nothing but comments, or `crawlers:` with
// nothing under it. A valid policy that does nothing, and also what a
// file cut short looks like.
func (p *Policy) Blank() bool { return p != nil && p.blank }

// Replaces says whether p may replace cur, the policy in force, on a
// reload: a blank file (see Blank) does not replace one with entries,
// since a file cut short would otherwise lift every sandbox at once.
func (p *Policy) Replaces(cur *Policy) error {
	if p.Blank() && cur != nil && len(cur.crawlers)+len(cur.sites) > 0 {
		return &Error{File: p.file, Msg: "the file is empty, or comments only (cut short?): the policy in force stays; to lift every entry on purpose, write `crawlers: []`"}
	}
	return nil
}
