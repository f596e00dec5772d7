package robots

import (
	"net/http"
	"strconv"
)

// Outcome is how an attempt to get an origin's robots.txt ended, in RFC
// 9309 §2.3.1's terms. The zero value is no outcome; [Answer.Check] treats
// it as a complete disallow.
type Outcome uint8

const (
	// OutcomeOK: a 2xx answer; its body's rules apply.
	OutcomeOK Outcome = iota + 1
	// OutcomeUnavailable: a 4xx answer (but 429), too many redirects, or
	// a redirect loop: no restrictions (§2.3.1.3).
	OutcomeUnavailable
	// OutcomeUnreachable: a 5xx or 429 answer, another status that is
	// neither 2xx nor a usable redirect, or a network, TLS or protocol
	// error or a timeout: complete disallow (§2.3.1.4). It is the only
	// transient outcome: a cache may keep obeying an earlier good copy.
	OutcomeUnreachable
	// OutcomeRestricted: a 401 or 403 answer read as the 1996 draft
	// advised (see [OutcomeOfStatus]): the origin answered, and its answer
	// is a complete disallow. Unlike OutcomeUnreachable it is not a
	// failure; it replaces an earlier copy.
	OutcomeRestricted
)

// String returns "ok", "unavailable", "unreachable" or "restricted".
func (o Outcome) String() string {
	switch o {
	case OutcomeOK:
		return "ok"
	case OutcomeUnavailable:
		return "unavailable"
	case OutcomeUnreachable:
		return "unreachable"
	case OutcomeRestricted:
		return "restricted"
	}
	return "outcome " + strconv.Itoa(int(o))
}

// OutcomeOfStatus is what the final status of a robots.txt request means
// once redirects have been followed (RFC 9309 §2.3.1). authDisallow reads
// 401 and 403 as the 1996 draft did, a complete disallow, instead of RFC
// 9309's "unavailable".
func OutcomeOfStatus(code int, authDisallow bool) Outcome {
	switch {
	case 200 <= code && code <= 299:
		return OutcomeOK
	case (code == http.StatusUnauthorized || code == http.StatusForbidden) && authDisallow:
		return OutcomeRestricted
	case 400 <= code && code <= 499 && code != http.StatusTooManyRequests:
		return OutcomeUnavailable
	}
	// 429 asks to come back later, not that there are no rules; 5xx, 1xx,
	// 3xx not followed and the like say nothing usable: the safe side.
	return OutcomeUnreachable
}

// Answer is what an origin's robots.txt says: how getting it ended and,
// when that went well, its rules. It is immutable once built.
type Answer struct {
	Outcome Outcome
	// Detail is the short account of an outcome that is not OK, which
	// verdicts carry (see [Verdict]): "robots.txt 404", "robots.txt
	// unreachable: timeout", "robots.txt: redirect loop"...
	Detail string
	// Robots is the parsed file; never nil when Outcome is OutcomeOK (an
	// empty body has no rules), nil otherwise.
	Robots *Robots
}

// Check decides whether the crawler with the product token may fetch
// pathAndQuery: by the rules when the outcome is OK; anything when
// robots.txt is unavailable; nothing but /robots.txt (without a query)
// otherwise. Like
// [Robots.Check] it does not allocate unless the path needs
// percent-normalising.
func (a *Answer) Check(token, pathAndQuery string) Verdict {
	if a != nil && a.Outcome == OutcomeOK {
		return a.Robots.Check(token, pathAndQuery)
	}
	if isRobotsTxt(pathAndQuery) {
		return Verdict{Allowed: true, Cause: CauseRobotsTxt}
	}
	if a == nil {
		return Verdict{Cause: CauseUnreachable, Detail: "robots.txt not fetched"}
	}
	if a.Outcome == OutcomeUnavailable {
		return Verdict{Allowed: true, Cause: CauseUnavailable, Detail: a.Detail}
	}
	return Verdict{Cause: CauseUnreachable, Detail: a.Detail}
}

// Pace is what robots.txt asks of the token's pace (see [Robots.Pace]);
// false when it asks nothing or could not be read.
func (a *Answer) Pace(token string) (Pace, bool) {
	if a == nil || a.Outcome != OutcomeOK {
		return Pace{}, false
	}
	return a.Robots.Pace(token)
}

// RetainedBytes estimates the memory a keeps alive, parsed rules
// included, for charging it against a cache budget.
func (a *Answer) RetainedBytes() int64 {
	if a == nil {
		return 0
	}
	return allocSize(len(a.Detail)) + a.Robots.RetainedBytes()
}
