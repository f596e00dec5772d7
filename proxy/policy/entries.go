package policy

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"robotsgate/proxy/signing"
	"robotsgate/robots"
)

// crawler is a crawler entry, compiled.
type crawler struct {
	// user or token names the crawler (the other is ""); name is what a
	// message calls it: the user, the token, or "every crawler".
	user, token, name string
	purposes          []string
	// allow is nil when the entry has no allow_sites: every site.
	allow        *hostSet
	allowFinding *Finding
	deny         hostSet
	rules        *ruleSet // nil without rules

	minDelay        time.Duration
	minDelayFinding *Finding
	maxConc         int // 0: no bound
	maxConcFinding  *Finding

	// signer is the user's signing identity, nil without signing_keys.
	signer *signing.Identity
	// signerLine is the line of signing_keys, for notes.
	signerLine int
}

// site is a site entry, compiled.
type site struct {
	index, line int
	hosts       []string // as written, for notes
	// everyone: the entry names no users and no tokens (or the token
	// "*"), so it applies to every crawler.
	everyone bool
	users    []string
	tokens   []string // as written; compared case-insensitively
	reason   string
	rules    *ruleSet // nil without rules

	exceptions     *exceptionSet // nil without exceptions
	exceptionCount int
}

// appliesTo reports whether the entry speaks for the crawler: a user
// only when authenticated (user != ""), a token case-insensitively.
func (s *site) appliesTo(user, token string) bool {
	if s.everyone {
		return true
	}
	if user != "" {
		for _, u := range s.users {
			if u == user {
				return true
			}
		}
	}
	for _, t := range s.tokens {
		if strings.EqualFold(t, token) {
			return true
		}
	}
	return false
}

// lazyRobots is robots.txt text compiled on first use: most entries of a
// large policy speak for sites one instance never visits, and a compiled
// group is many small objects the garbage collector would walk on every
// cycle for nothing.
type lazyRobots struct {
	text string
	once sync.Once
	r    *robots.Robots
}

func (l *lazyRobots) get() *robots.Robots {
	l.once.Do(func() { l.r = robots.Parser{MaxBytes: len(l.text) + 1}.Parse([]byte(l.text)) })
	return l.r
}

// ruleSet is an entry's rules as a robots.txt group of their own.
type ruleSet struct {
	robots lazyRobots
	// findings holds each rule's Finding by its line in the robots.txt
	// text the rules were compiled into; lines that are no rule have a
	// zero Finding.
	findings []Finding
	// hasDisallow: a set of Allow lines alone refuses nothing, and is not
	// judged.
	hasDisallow bool
	// unjudged refuses a path the rules could not judge (more readings
	// than robots.MaxReadings, or too costly).
	unjudged Finding
}

// at is the Finding of the rule at line of the compiled text, nil for
// none.
func at(findings []Finding, line int) *Finding {
	if line <= 0 || line >= len(findings) || findings[line].Line == 0 {
		return nil
	}
	return &findings[line]
}

// refusal returns the Finding that refuses pathAndQuery, or nil.
func (rs *ruleSet) refusal(pathAndQuery string) *Finding {
	if rs == nil || !rs.hasDisallow {
		return nil
	}
	v := rs.robots.get().CheckReadings("*", pathAndQuery)
	if v.Allowed {
		return nil
	}
	if v.Cause == robots.CauseRule && !v.Rule.IsZero() {
		if f := at(rs.findings, int(v.Rule.Line)); f != nil {
			return f
		}
	}
	return &rs.unjudged
}

// everything returns the Finding of the rule refusing every path, when
// the rules refuse them all (robots.Robots.DisallowsAll), or nil.
func (rs *ruleSet) everything() *Finding {
	if rs == nil || !rs.hasDisallow {
		return nil
	}
	v, all := rs.robots.get().DisallowsAll("*")
	if !all || v.Rule.IsZero() {
		return nil
	}
	return at(rs.findings, int(v.Rule.Line))
}

// exceptionSet is a site entry's exceptions as one robots.txt group.
type exceptionSet struct {
	robots   lazyRobots
	findings []Finding // by line in the compiled text, as ruleSet's
}

// covering returns the exception allowing pathAndQuery, or nil: every
// reading of the path must match an exception. The rule robots.txt
// implies for ".../index.html" (the directory's own URL) covers nothing:
// an exception allows what it names.
func (es *exceptionSet) covering(pathAndQuery string) *Finding {
	if es == nil {
		return nil
	}
	v := es.robots.get().CheckReadings("*", pathAndQuery)
	if !v.Allowed || v.Cause != robots.CauseRule || v.Rule.IsZero() || !v.Rule.Allow || v.Rule.Implied {
		return nil
	}
	return at(es.findings, int(v.Rule.Line))
}

// compile builds the lookups of a parsed policy.
func (p *Policy) compile(index siteIndexBuilder) {
	for _, c := range p.crawlers {
		switch {
		case c.user != "":
			if p.byUser == nil {
				p.byUser = make(map[string][]*crawler)
			}
			p.byUser[c.user] = append(p.byUser[c.user], c)
			if c.signer != nil {
				p.identities = append(p.identities, c.signer)
			}
		case c.token == "*":
			p.every = append(p.every, c)
		default:
			if p.byToken == nil {
				p.byToken = make(map[string][]*crawler)
			}
			key := strings.ToLower(c.token)
			p.byToken[key] = append(p.byToken[key], c)
		}
	}
	p.hostIndex = index.build()
}

// notes lists what the loader should warn about: exceptions that an
// anonymous client can claim by the User-Agent it sends, site entries
// that do nothing, and signing identities without a key valid now.
func notes(p *Policy, now time.Time) []string {
	var out []string
	for _, c := range p.crawlers {
		if c.signer == nil {
			continue
		}
		if _, err := c.signer.Current(now); err != nil {
			out = append(out, fmt.Sprintf("%s line %d: %v; %s's requests are refused until a key is valid", p.file, c.signerLine, err, c.user))
		}
	}
	for _, s := range p.sites {
		where := fmt.Sprintf("%s line %d", p.file, s.line)
		hosts := strings.TrimPrefix(listText("hosts", s.hosts), "hosts: ")
		switch {
		case s.exceptions == nil && s.rules == nil:
			out = append(out, fmt.Sprintf("%s: the site entry (%s) has no rules and no exceptions: it does nothing", where, hosts))
		case s.exceptions == nil:
		case s.everyone:
			out = append(out, fmt.Sprintf("%s: the exceptions for %s are granted to every crawler: any client, anonymous ones included, gets them; name the users they are for (users: [...])",
				where, hosts))
		case len(s.tokens) > 0:
			out = append(out, fmt.Sprintf("%s: the exceptions for %s are granted by token (%s): any anonymous client naming itself %s gets them; grant them to a user (users: [...]) to tie them to a credential",
				where, hosts, strings.Join(s.tokens, ", "), s.tokens[0]))
		}
	}
	return out
}
