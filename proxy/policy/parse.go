package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"robotsgate/proxy/signing"
	"robotsgate/robots"
)

// Bounds on what a file may ask for: beyond them a value is a mistake.
const (
	maxMinDelay       = 24 * time.Hour
	maxMaxConcurrency = 1_000_000
	maxPurposeBytes   = 64
	// maxErrors is how many errors one load reports: the first ones are
	// what an operator fixes first.
	maxErrors = 20
)

// The keys each part of the file accepts, in the order a message lists
// them.
var (
	topKeys       = []string{"crawlers", "sites"}
	crawlerKeys   = []string{"user", "token", "purposes", "allow_sites", "deny_sites", "rules", "min_delay", "max_concurrency", "signing_keys", "signature_agent"}
	siteKeys      = []string{"hosts", "users", "tokens", "rules", "reason", "exceptions"}
	exceptionKeys = []string{"allow", "reason"}
)

// Options are the settings a policy file is read with.
type Options struct {
	// SignatureAgent is the Signature-Agent URL of a user entry with
	// signing_keys and no signature_agent (ROBOTSGATE_SIGNATURE_AGENT).
	SignatureAgent string
}

// Parse is ParseOptions with no Options.
func Parse(name string, data []byte) (*Policy, error) {
	return ParseOptions(name, data, Options{})
}

// ParseOptions parses a policy file's bytes; name is the file's path as
// errors and findings name it, and key files (signing_keys) are read
// relative to its folder. An empty file, or one of comments only, is a
// valid empty policy. Every error names the file and line; up to 20 are
// reported at once.
func ParseOptions(name string, data []byte, opts Options) (*Policy, error) {
	ps := &parser{file: name, dir: filepath.Dir(name), opts: opts}
	p := &Policy{file: name, version: versionOf(data)}
	if len(data) > MaxFileBytes {
		return nil, &Error{File: name, Msg: fmt.Sprintf("%d bytes, over the limit of %d MiB for a policy file", len(data), MaxFileBytes>>20)}
	}
	if err := checkText(name, data); err != nil {
		return nil, err
	}
	root, err := decode(name, data)
	if err != nil {
		return nil, err
	}
	p.blank = true
	if root != nil {
		ps.policy(p, root)
	}
	if len(ps.errs) > 0 {
		// In the order of the file, so that the first listed are the first
		// to fix.
		slices.SortStableFunc(ps.errs, func(a, b error) int { return lineOfError(a) - lineOfError(b) })
		if len(ps.errs) > maxErrors {
			more := len(ps.errs) - maxErrors
			ps.errs = append(ps.errs[:maxErrors], &Error{File: name, Msg: fmt.Sprintf("and %d more errors", more)})
		}
		return nil, errors.Join(ps.errs...)
	}
	p.compile(ps.index)
	p.notes = notes(p, time.Now())
	return p, nil
}

// checkText refuses bytes that are not UTF-8 text, at their line: the
// YAML parser's own errors for them name no line.
func checkText(name string, data []byte) error {
	line := 1
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == '\n':
			line++
		case c < 0x20 && c != '\t' && c != '\r' || c == 0x7f:
			return &Error{File: name, Line: line, Msg: fmt.Sprintf("the control character %q cannot be in a policy file", rune(c))}
		case c >= 0x80:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size <= 1 {
				return &Error{File: name, Line: line, Msg: "the file is not UTF-8 text"}
			}
			i += size
			continue
		}
		i++
	}
	return nil
}

// yamlLine finds the line in a YAML parser's error: "yaml: line 3: ...".
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// decode parses the YAML document, refusing a second one (what follows a
// "---" would be silently ignored otherwise). It returns nil for a file
// without a document.
func decode(name string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, nil
		}
		return nil, yamlError(name, data, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, &Error{File: name, Line: next.Line, Msg: "a second YAML document: a policy file is one document (remove the '---')"}
	case err != io.EOF:
		return nil, yamlError(name, data, err)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

// yamlError names the file and, when the parser gave one, the line; a
// tab in that line's indentation, the commonest cause, is pointed out.
func yamlError(name string, data []byte, err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		msg = m[2]
		switch text := lineOf(data, line); {
		case strings.TrimLeft(text, " ") != strings.TrimLeft(text, " \t"):
			msg += " (a tab: YAML indents with spaces, not tabs)"
		case unquotedStar.MatchString(text):
			msg += ` (YAML reads a value starting with * as an alias: quote it, "*.example.com", "*")`
		}
		return &Error{File: name, Line: line, Msg: msg}
	}
	return &Error{File: name, Msg: strings.TrimPrefix(msg, "yaml: ")}
}

// lineOfError is the line an error of the parser names, 0 for none.
func lineOfError(err error) int {
	if e, ok := err.(*Error); ok {
		return e.Line
	}
	return 0
}

// unquotedStar finds a value starting with an unquoted '*': after a key,
// a list's dash, or '[' or ',' in a flow list.
var unquotedStar = regexp.MustCompile(`(:|-|\[|,)\s*\*`)

// lineOf returns line n (from 1) of data, "" past its end.
func lineOf(data []byte, n int) string {
	for i := 1; i < n; i++ {
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			return ""
		}
		data = data[nl+1:]
	}
	if nl := bytes.IndexByte(data, '\n'); nl >= 0 {
		data = data[:nl]
	}
	return string(data)
}

// parser walks the YAML nodes, collecting errors.
type parser struct {
	file string
	// dir is the file's folder, against which key files are read.
	dir   string
	opts  Options
	errs  []error
	index siteIndexBuilder
	// signers holds the line of each user's entry with signing_keys, and
	// keyUsers the user each key id was given to.
	signers  map[string]int
	keyUsers map[string]string
}

func (ps *parser) errorf(n *yaml.Node, format string, args ...any) {
	ps.errs = append(ps.errs, &Error{File: ps.file, Line: n.Line, Msg: fmt.Sprintf(format, args...)})
}

// plain refuses anchors and aliases: expanding them is how a small file
// grows without bound, and a policy gains nothing from them.
func (ps *parser) plain(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		ps.errorf(n, "anchors and aliases (&, *, <<) are not accepted in a policy file: write each entry out")
		return false
	}
	return true
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// field is a key of a mapping and its value.
type field struct {
	key, value *yaml.Node
}

// fields reads a mapping whose keys must be among allowed.
func (ps *parser) fields(n *yaml.Node, what string, allowed []string) (map[string]field, bool) {
	if !ps.plain(n) {
		return nil, false
	}
	if n.Kind != yaml.MappingNode {
		ps.errorf(n, "%s is a mapping of keys (%s), not %s", what, strings.Join(allowed, ", "), describe(n))
		return nil, false
	}
	out := make(map[string]field, len(n.Content)/2)
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !ps.plain(k) {
			ok = false
			continue
		}
		if k.Kind != yaml.ScalarNode || !contains(allowed, k.Value) {
			ps.errorf(k, "unknown key %q in %s (its keys are %s)", keyText(k), what, strings.Join(allowed, ", "))
			ok = false
			continue
		}
		if first, dup := out[k.Value]; dup {
			ps.errorf(k, "%s is given twice in %s (first on line %d)", k.Value, what, first.key.Line)
			ok = false
			continue
		}
		out[k.Value] = field{k, v}
	}
	return out, ok
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func keyText(k *yaml.Node) string {
	if k.Kind == yaml.ScalarNode {
		return clip(k.Value)
	}
	return describe(k)
}

// describe names what a node is, for a message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "empty"
		case "!!bool":
			return "true or false"
		case "!!int", "!!float":
			return "the number " + clip(n.Value)
		}
		return strconv.Quote(clip(n.Value))
	}
	return "a YAML document"
}

// str reads a scalar as a string: numbers are kept as written, so that
// `user: 2026` is the name "2026".
func (ps *parser) str(f field) (string, bool) {
	n := f.value
	if !ps.plain(n) {
		return "", false
	}
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!str", "!!int", "!!float":
			return n.Value, true
		}
	}
	ps.errorf(n, "%s is a string, not %s", f.key.Value, describe(n))
	return "", false
}

// list reads a sequence. A key with no value is an error: "allow_sites:"
// alone would otherwise be read as either "every site" or "no site".
func (ps *parser) list(f field) ([]*yaml.Node, bool) {
	n := f.value
	if !ps.plain(n) {
		return nil, false
	}
	if n.Kind != yaml.SequenceNode {
		ps.errorf(n, "%s is a list ([...] or lines starting with '- '), not %s", f.key.Value, describe(n))
		return nil, false
	}
	return n.Content, true
}

// strs reads a list of strings, each checked by check (which returns an
// error message, or "").
func (ps *parser) strs(f field, check func(string) string) ([]string, []*yaml.Node, bool) {
	items, ok := ps.list(f)
	if !ok {
		return nil, nil, false
	}
	out := make([]string, 0, len(items))
	for _, item := range items {
		s, ok := ps.str(field{f.key, item})
		if !ok {
			continue
		}
		if check != nil {
			if msg := check(s); msg != "" {
				ps.errorf(item, "%s", msg)
				continue
			}
		}
		out = append(out, s)
	}
	if len(out) < len(items) {
		return nil, nil, false
	}
	return out, items, true
}

func (ps *parser) policy(p *Policy, root *yaml.Node) {
	p.blank = true // until an entry, or a list said empty on purpose
	if isNull(root) {
		return // a document of comments only
	}
	top, ok := ps.fields(root, "the policy file", topKeys)
	if !ok {
		return
	}
	for _, f := range top {
		if f.value.Kind == yaml.SequenceNode {
			p.blank = false
		}
	}
	if f, ok := top["crawlers"]; ok && !isNull(f.value) {
		items, _ := ps.list(f)
		for _, item := range items {
			if c := ps.crawler(item); c != nil {
				p.crawlers = append(p.crawlers, c)
			}
		}
	}
	if f, ok := top["sites"]; ok && !isNull(f.value) {
		items, _ := ps.list(f)
		for _, item := range items {
			if s := ps.site(item, len(p.sites)); s != nil {
				p.sites = append(p.sites, s)
				p.exceptions += s.exceptionCount
			}
		}
	}
}

func (ps *parser) crawler(n *yaml.Node) *crawler {
	fs, ok := ps.fields(n, "a crawler entry", crawlerKeys)
	if !ok {
		return nil
	}
	c := &crawler{}
	user, hasUser := fs["user"]
	token, hasToken := fs["token"]
	switch {
	case hasUser && hasToken:
		ps.errorf(token.key, "a crawler entry names a user or a token, not both (user on line %d): write two entries", user.key.Line)
		return nil
	case hasUser:
		if c.user, ok = ps.str(user); !ok {
			return nil
		}
		if msg := checkUser(c.user); msg != "" {
			ps.errorf(user.value, "%s", msg)
			return nil
		}
		c.name = c.user
	case hasToken:
		if c.token, ok = ps.str(token); !ok {
			return nil
		}
		if msg := checkToken(c.token); msg != "" {
			ps.errorf(token.value, "%s", msg)
			return nil
		}
		c.name = c.token
		if c.token == "*" {
			c.name = "every crawler"
		}
	default:
		ps.errorf(n, "a crawler entry names a user (a credential's name) or a token (a product token, or \"*\" for every crawler)")
		return nil
	}
	good := ps.identity(c, n, fs)
	if f, ok := fs["purposes"]; ok {
		var ok bool
		c.purposes, _, ok = ps.strs(f, checkPurpose)
		good = good && ok
		c.purposes = dedupe(c.purposes)
	}
	if f, ok := fs["allow_sites"]; ok {
		patterns, items, ok := ps.strs(f, nil)
		good = good && ok
		c.allow = &hostSet{}
		c.allowFinding = &Finding{File: ps.file, Line: f.key.Line, Kind: KindDestination,
			Rule: listText("allow_sites", patterns), Reason: c.name + " may visit only the sites allow_sites names"}
		for i, s := range patterns {
			if hp, err := parseHostPattern(s); err != nil {
				ps.errorf(items[i], "%v", err)
				good = false
			} else {
				c.allow.add(hp, c.allowFinding)
			}
		}
	}
	if f, ok := fs["deny_sites"]; ok {
		patterns, items, ok := ps.strs(f, nil)
		good = good && ok
		for i, s := range patterns {
			hp, err := parseHostPattern(s)
			if err != nil {
				ps.errorf(items[i], "%v", err)
				good = false
				continue
			}
			c.deny.add(hp, &Finding{File: ps.file, Line: items[i].Line, Kind: KindDestination,
				Rule: "deny_sites: " + s, Reason: "the policy keeps " + c.name + " away from " + s})
		}
	}
	if f, ok := fs["rules"]; ok {
		var rs *ruleSet
		rs, ok = ps.rules(f, "")
		good = good && ok
		c.rules = rs
	}
	if f, ok := fs["min_delay"]; ok {
		s, ok := ps.str(f)
		d, err := time.ParseDuration(s)
		switch {
		case !ok:
			good = false
		case err != nil:
			ps.errorf(f.value, "min_delay %q is not a duration (2s, 500ms, 1m30s)", s)
			good = false
		case d < 0 || d > maxMinDelay:
			ps.errorf(f.value, "min_delay %s is not between 0s and 24h", s)
			good = false
		case d > 0:
			c.minDelay = d
			c.minDelayFinding = &Finding{File: ps.file, Line: f.key.Line, Kind: KindMinDelay,
				Rule: "min_delay: " + s, Reason: "the policy's floor on " + c.name + "'s pace per site"}
		}
	}
	if f, ok := fs["max_concurrency"]; ok {
		var v int
		if f.value.Kind != yaml.ScalarNode || f.value.ShortTag() != "!!int" || f.value.Decode(&v) != nil || v < 1 || v > maxMaxConcurrency {
			if ps.plain(f.value) {
				ps.errorf(f.value, "max_concurrency is a whole number from 1 to %d, not %s", maxMaxConcurrency, describe(f.value))
			}
			good = false
		} else {
			c.maxConc = v
			c.maxConcFinding = &Finding{File: ps.file, Line: f.key.Line, Kind: KindMaxConcurrency,
				Rule: "max_concurrency: " + f.value.Value, Reason: "the policy's bound on " + c.name + "'s requests in flight per site"}
		}
	}
	if !good {
		return nil
	}
	return c
}

// identity reads a crawler entry's signing_keys and signature_agent into
// its signing identity. Keys are for users only: a token names whatever
// client sends it, so signing for a token would lend the crawler's
// identity to anyone.
func (ps *parser) identity(c *crawler, entry *yaml.Node, fs map[string]field) bool {
	keys, hasKeys := fs["signing_keys"]
	agent, hasAgent := fs["signature_agent"]
	switch {
	case !hasKeys && !hasAgent:
		return true
	case c.user == "":
		for _, f := range []field{keys, agent} {
			if f.key != nil {
				ps.errorf(f.key, "%s on a token entry: a token can be claimed by any client's User-Agent, so signing keys are given to credential users (user:); for the crawler ROBOTSGATE_TOKEN pins, use ROBOTSGATE_SIGNING_KEY", f.key.Value)
			}
		}
		return false
	case !hasKeys:
		ps.errorf(agent.key, "signature_agent without signing_keys: name the key files that sign %s's requests (signing_keys: [FILE, ...])", c.user)
		return false
	}
	if first, dup := ps.signers[c.user]; dup {
		ps.errorf(keys.key, "%s's signing keys are given by the entry on line %d already: one entry per user has signing_keys (list every key file there)", c.user, first)
		return false
	}
	if ps.signers == nil {
		ps.signers = make(map[string]int)
	}
	ps.signers[c.user] = entry.Line
	good := true
	agentURL := ps.opts.SignatureAgent
	if hasAgent {
		agentURL, good = ps.str(agent)
		if good {
			if err := signing.CheckAgent(agentURL); err != nil {
				ps.errorf(agent.value, "%v", err)
				good = false
			}
		}
	}
	files, items, ok := ps.strs(keys, checkKeyFile)
	if ok && len(files) == 0 {
		ps.errorf(keys.value, "signing_keys is empty: name at least one key file (make one with: robotsgate keygen FILE)")
		ok = false
	}
	var all []*signing.Key
	for i, file := range files {
		ks, err := readKeyFile(ps.dir, file)
		if err != nil {
			ps.errorf(items[i], "%v", err)
			ok = false
			continue
		}
		all = append(all, ks...)
	}
	if !good || !ok {
		return false
	}
	if !hasAgent {
		if agentURL == "" {
			ps.errorf(keys.key, "%s's signing keys need a Signature-Agent URL, where sites find the key directory: add signature_agent: URL, or set ROBOTSGATE_SIGNATURE_AGENT", c.user)
			return false
		}
		if err := signing.CheckAgent(agentURL); err != nil {
			ps.errorf(keys.key, "ROBOTSGATE_SIGNATURE_AGENT, %s's Signature-Agent: %v", c.user, err)
			return false
		}
	}
	id, err := signing.NewIdentity("user "+c.user, agentURL, all)
	if err != nil {
		ps.errorf(keys.key, "%v", err)
		return false
	}
	if ps.keyUsers == nil {
		ps.keyUsers = make(map[string]string)
	}
	for _, k := range all {
		if other, ok := ps.keyUsers[k.ID()]; ok && other != c.user {
			ps.errorf(keys.key, "key %s is %s's too: each user signs with keys of its own, or sites take one's requests for the other's", k.ID(), other)
			return false
		}
		ps.keyUsers[k.ID()] = c.user
	}
	c.signer, c.signerLine = id, keys.key.Line
	return true
}

// readKeyFile reads a key file named in the policy, relative to dir
// unless absolute.
func readKeyFile(dir, file string) ([]*signing.Key, error) {
	if !filepath.IsAbs(file) {
		file = filepath.Join(dir, file)
	}
	return signing.ReadKeyFile(file)
}

func (ps *parser) site(n *yaml.Node, index int) *site {
	fs, ok := ps.fields(n, "a site entry", siteKeys)
	if !ok {
		return nil
	}
	s := &site{index: index, line: n.Line}
	good := true
	if f, ok := fs["reason"]; ok {
		s.reason, good = ps.str(f)
	}
	hosts, hasHosts := fs["hosts"]
	if !hasHosts {
		ps.errorf(n, "a site entry needs hosts: the sites it speaks for")
		return nil
	}
	patterns, items, ok := ps.strs(hosts, nil)
	if ok && len(patterns) == 0 {
		ps.errorf(hosts.value, "hosts is empty: name the sites the entry speaks for")
		ok = false
	}
	good = good && ok
	var compiled []hostPattern
	for i, p := range patterns {
		hp, err := parseHostPattern(p)
		if err != nil {
			ps.errorf(items[i], "%v", err)
			good = false
			continue
		}
		compiled = append(compiled, hp)
	}
	s.hosts = patterns
	if f, ok := fs["users"]; ok {
		var ok bool
		s.users, _, ok = ps.strs(f, checkUser)
		good = good && ok
	}
	if f, ok := fs["tokens"]; ok {
		var ok bool
		s.tokens, _, ok = ps.strs(f, checkToken)
		good = good && ok
	}
	s.everyone = contains(s.tokens, "*") || fs["users"].key == nil && fs["tokens"].key == nil
	if f, ok := fs["rules"]; ok {
		var ok bool
		s.rules, ok = ps.rules(f, s.reason)
		good = good && ok
	}
	if f, ok := fs["exceptions"]; ok {
		var ok bool
		s.exceptions, s.exceptionCount, ok = ps.exceptions(f)
		good = good && ok
	}
	if !good {
		return nil
	}
	for _, hp := range compiled {
		ps.index.add(hp, s)
	}
	return s
}

// rules compiles a rules list into a robots.txt group of its own, one
// line per rule, keeping which line of the policy each came from.
func (ps *parser) rules(f field, reason string) (*ruleSet, bool) {
	lines, items, ok := ps.strs(f, nil)
	if !ok {
		if f.value.Kind == yaml.SequenceNode {
			for _, item := range f.value.Content {
				if item.Kind == yaml.MappingNode && len(item.Content) == 2 {
					ps.errorf(item, "quote the rule: YAML reads an unquoted \"%s: %s\" as a mapping", item.Content[0].Value, item.Content[1].Value)
				}
			}
		}
		return nil, false
	}
	if len(lines) == 0 {
		return nil, true
	}
	rs := &ruleSet{unjudged: Finding{File: ps.file, Line: f.key.Line, Kind: KindRule,
		Rule: "rules: the path has too many readings, or is too costly, to judge", Reason: reason}}
	var text strings.Builder
	text.WriteString("User-agent: *\n")
	rs.findings = make([]Finding, 2, len(lines)+2) // robots.txt lines 1 (User-agent) and 0
	good := true
	for i, line := range lines {
		allow, pattern, msg := parseRuleLine(line)
		if msg != "" {
			ps.errorf(items[i], "%s", msg)
			good = false
			continue
		}
		key := "Disallow"
		if allow {
			key = "Allow"
		} else {
			rs.hasDisallow = true
		}
		text.WriteString(key + ": " + pattern + "\n")
		rs.findings = append(rs.findings, Finding{File: ps.file, Line: items[i].Line, Kind: KindRule,
			Rule: key + ": " + pattern, Reason: reason})
	}
	if !good {
		return nil, false
	}
	rs.robots.text = text.String()
	return rs, true
}

// exceptions compiles a site entry's exceptions into one robots.txt
// group: "Disallow: /" and an "Allow:" line per exception, so that a path
// is allowed exactly when every reading of it matches an exception, and
// the deciding rule's line names the exception.
func (ps *parser) exceptions(f field) (*exceptionSet, int, bool) {
	items, ok := ps.list(f)
	if !ok {
		return nil, 0, false
	}
	if len(items) == 0 {
		return nil, 0, true
	}
	es := &exceptionSet{findings: make([]Finding, 3, len(items)+3)} // lines 0, 1 and 2 are no exception
	var text strings.Builder
	text.WriteString("User-agent: *\nDisallow: /\n")
	good := true
	for _, item := range items {
		fs, ok := ps.fields(item, "an exception", exceptionKeys)
		if !ok {
			good = false
			continue
		}
		allow, hasAllow := fs["allow"]
		reason, hasReason := fs["reason"]
		if !hasAllow {
			ps.errorf(item, "an exception needs allow: the path pattern it allows (/reports/)")
			good = false
			continue
		}
		pattern, ok := ps.str(allow)
		if !ok {
			good = false
			continue
		}
		if msg := checkPattern(pattern); msg != "" {
			ps.errorf(allow.value, "%s", msg)
			good = false
			continue
		}
		if !hasReason {
			ps.errorf(item, "an exception needs a reason: who allowed it, and when")
			good = false
			continue
		}
		why, ok := ps.str(reason)
		if ok && strings.TrimSpace(why) == "" {
			ps.errorf(reason.value, "the reason is empty: say who allowed the exception, and when")
			ok = false
		}
		if !ok {
			good = false
			continue
		}
		text.WriteString("Allow: " + pattern + "\n")
		es.findings = append(es.findings, Finding{File: ps.file, Line: allow.key.Line, Kind: KindException,
			Rule: "allow: " + pattern, Reason: why})
	}
	if !good {
		return nil, 0, false
	}
	es.robots.text = text.String()
	return es, len(items), true
}

// parseRuleLine reads "Allow: pattern" or "Disallow: pattern" (any case;
// a '#' comment is dropped, as robots.txt does). msg says what is wrong.
func parseRuleLine(line string) (allow bool, pattern, msg string) {
	key, value, ok := strings.Cut(line, ":")
	if !ok {
		return false, "", fmt.Sprintf("%q is not a rule: write Allow: or Disallow: and a path pattern", clip(line))
	}
	switch strings.ToLower(strings.TrimSpace(key)) {
	case "allow":
		allow = true
	case "disallow":
	default:
		return false, "", fmt.Sprintf("%q: only Allow: and Disallow: lines are rules here", clip(line))
	}
	if hash := strings.IndexByte(value, '#'); hash >= 0 {
		value = value[:hash]
	}
	pattern = strings.TrimSpace(value)
	if msg := checkPattern(pattern); msg != "" {
		return false, "", msg
	}
	return allow, pattern, ""
}

// checkPattern checks a robots.txt path pattern.
func checkPattern(p string) string {
	switch {
	case p == "":
		return "an empty path pattern: a rule needs a path (/ for every path)"
	case p[0] != '/' && p[0] != '*':
		return fmt.Sprintf("the path pattern %q starts with neither '/' nor '*', so it matches no path", clip(p))
	case strings.ContainsAny(p, " \t#"):
		return fmt.Sprintf("the path pattern %q has white space or '#' in it: percent-encode them (%%20, %%23)", clip(p))
	case len(p) > robots.MaxLineBytes-len("Disallow: "):
		return fmt.Sprintf("a path pattern of %d bytes, longer than a robots.txt line may be", len(p))
	}
	return ""
}

// checkUser checks a credential name: ROBOTSGATE_CREDENTIALS_FILE's
// names have no ':' and no surrounding white space.
func checkUser(s string) string {
	switch {
	case s == "":
		return "an empty user name"
	case strings.TrimSpace(s) != s || strings.ContainsAny(s, ":\t"):
		return fmt.Sprintf("%q is not a credential's name (no ':', no white space around it)", clip(s))
	}
	return ""
}

// checkKeyFile checks a key file's name: one with a control character
// in it is a mistake, and would break the error naming it in two.
func checkKeyFile(s string) string {
	switch {
	case s == "":
		return "an empty file name: name a key file (make one with: robotsgate keygen FILE)"
	case strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Sprintf("the file name %q has a control character in it", clip(s))
	}
	return ""
}

// checkToken checks a product token, or "*".
func checkToken(s string) string {
	if s == "*" {
		return ""
	}
	if name, global := robots.ProductName(s); name != s || global || s == "" {
		return fmt.Sprintf("%q is not a product token (letters, digits and -_.!, as in a User-agent line) nor \"*\"", clip(s))
	}
	return ""
}

// checkPurpose checks a purpose: a lower-case token.
func checkPurpose(s string) string {
	if s == "" || len(s) > maxPurposeBytes || strings.IndexFunc(s, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-'
	}) >= 0 {
		return fmt.Sprintf("the purpose %q is not a lower-case word of letters, digits and '-' (search, archive, ai-train)", clip(s))
	}
	return ""
}

func dedupe(list []string) []string {
	out := list[:0]
	for _, s := range list {
		if !contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// clip cuts s to 100 bytes for a message.
func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}
