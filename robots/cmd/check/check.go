// Package check is the "robotsgate check" command: it tells site owners,
// crawler authors and tests whether a crawler may fetch URLs, and why,
// from a robots.txt file or each origin's live robots.txt.
package check

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"

	"robotsgate/config"
	"robotsgate/proxy/audit"
	"robotsgate/proxy/pace"
	"robotsgate/proxy/policy"
	"robotsgate/robots"
	"robotsgate/robots/fetch"
	"robotsgate/robots/usage"
)

// Exit statuses.
const (
	ExitAllowed    = 0 // every URL is allowed
	ExitDisallowed = 1 // at least one URL is disallowed
	ExitUsage      = 2 // a usage or input error; the message names it
	// ExitInterrupted: the context ended (Ctrl-C) before every URL was
	// judged; what was printed is true, the rest was not judged.
	ExitInterrupted = 130
)

// Fetcher fetches an origin's robots.txt; *fetch.Fetcher is one.
type Fetcher interface {
	Fetch(ctx context.Context, origin string) *fetch.Result
}

// Env is what the command reads and writes.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Fetcher        Fetcher       // used when -robots is not given; KeepIgnored to list ignored lines
	NoFetcher      error         // why Fetcher is nil, said when one is needed
	Parser         robots.Parser // parses a -robots file; KeepIgnored to list ignored lines
	Pace           pace.Policy   // turns what robots.txt asks into the delay the proxy enforces
	// PolicyFile is the operator's policy the proxy judges by
	// (ROBOTSGATE_POLICY), -policy's default; "" for none.
	PolicyFile string
	// Purposes are ROBOTSGATE_PURPOSES, the purposes of the crawler Token
	// (ROBOTSGATE_TOKEN) names: -purpose's default for that crawler.
	Purposes []string
	Token    string
	// SignatureAgent is ROBOTSGATE_SIGNATURE_AGENT, the policy's default
	// for signing_keys.
	SignatureAgent string
}

const help = `usage: robotsgate check -user-agent UA [-robots FILE] [-policy FILE [-user NAME]] [-purpose LIST] [-json] [URL ...]

Says, for each URL, whether the crawler may fetch it and why. URLs come
from the arguments, or one per line on standard input when there are none.
With -robots, every URL is judged against FILE (URLs may then be bare
paths); otherwise each origin's robots.txt is fetched once.

Output: one line per URL, tab-separated: allowed or disallowed, the product
token ("*" when the User-Agent has none), the URL, the reason.
With -json, one object per URL instead, in the words of the audit log
and of the proxy's JSON 403: url, user_agent, token, verdict (allow or
disallow), reason, rule, rule_line, group, group_lines, robots_txt,
robots_outcome, robots_status; and crawl_delay, the seconds the proxy
keeps between two requests of this crawler to the origin (0 for none),
with crawl_delay_source (crawl-delay, request-rate, default or cap) and
crawl_delay_line, as ROBOTSGATE_DEFAULT_CRAWL_DELAY and
ROBOTSGATE_MAX_CRAWL_DELAY make it.
With a policy (-policy, by default ROBOTSGATE_POLICY's file; -policy ""
for none), each URL is judged as the proxy judges it with that file: a
site outside the crawler's allowed sites, a policy rule or an exception
decides, and says so in the reason and, with -json, in a policy object
(file, line, kind, rule, reason); the crawler is -user's credential when
given (the name in ROBOTSGATE_CREDENTIALS_FILE; -user-agent then gives its
token), else anonymous. A policy's min_delay shows in crawl_delay, with
crawl_delay_source policy. Try a change this way before loading it.
With -purpose (comma-separated: search, ai-train, ai-input; by default the
policy's purposes for the crawler and ROBOTSGATE_PURPOSES for the crawler
ROBOTSGATE_TOKEN names, together), the site's usage preferences in robots.txt
(Content-Usage, Content-Signal; tdmrep.json with ROBOTSGATE_TDMREP) judge
those purposes as the proxy does before a fetch: a refusal is disallowed,
its reason naming the line and label. A fifth column lists the
preferences that apply ("-" for none); -json adds purposes, usage (the
refusal) and usage_stated. Response headers are not seen: check fetches
no page.
Exit status: 0 all allowed, 1 any disallowed, 2 usage or input error,
130 interrupted (nothing is printed for the URLs not judged).

Flags:
`

// Run runs the command with args (after "check") and returns the exit
// status.
func Run(ctx context.Context, args []string, env Env) int {
	flags := flag.NewFlagSet("robotsgate check", flag.ContinueOnError)
	flags.SetOutput(env.Stderr)
	userAgent := flags.String("user-agent", "", "a product token (GPTBot) or a whole User-Agent header")
	robotsFile := flags.String("robots", "", "judge every URL against this robots.txt file instead of fetching")
	asJSON := flags.Bool("json", false, "print one JSON object per URL")
	policyFile := flags.String("policy", env.PolicyFile, "judge with this policy file too, as the proxy does (default ROBOTSGATE_POLICY's)")
	user := flags.String("user", "", "judge as this proxy credential's user, for the policy's user entries")
	var purposes []string
	flags.Func("purpose", "the crawler's purposes, comma-separated (search, ai-train, ai-input), judged against the sites' usage preferences", func(v string) error {
		// Read as ROBOTSGATE_PURPOSES is: a misspelt purpose ("AI-Train")
		// would match no preference and pass everything unnoticed.
		var list config.PurposeList
		if err := list.UnmarshalText([]byte(v)); err != nil {
			return err
		}
		for _, p := range list {
			if !slices.Contains(purposes, p) {
				purposes = append(purposes, p)
			}
		}
		return nil
	})
	flags.Usage = func() {
		fmt.Fprint(env.Stderr, help)
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitAllowed
		}
		return ExitUsage
	}
	if *userAgent == "" {
		fmt.Fprintln(env.Stderr, "robotsgate check: -user-agent is required (a product token such as GPTBot, or a whole User-Agent header)")
		return ExitUsage
	}
	c := &checker{env: env, token: robots.ProductToken(*userAgent), user: *user, json: *asJSON, fetched: make(map[string]*fetch.Result), purposes: purposes}
	flags.Visit(func(f *flag.Flag) {
		c.policyGiven = c.policyGiven || f.Name == "policy"
		c.purposeGiven = c.purposeGiven || f.Name == "purpose"
	})
	if !c.purposeGiven && len(env.Purposes) > 0 && strings.EqualFold(c.token, env.Token) {
		c.purposes = env.Purposes
	}
	if *policyFile != "" {
		data, err := os.ReadFile(*policyFile)
		if err == nil {
			c.policy, err = policy.ParseOptions(*policyFile, data, policy.Options{SignatureAgent: env.SignatureAgent})
		}
		if err != nil {
			fmt.Fprintf(env.Stderr, "robotsgate check: -policy: %v\n", err)
			return ExitUsage
		}
		if c.policyGiven { // a file being tried: what it grants is worth a word
			for _, note := range c.policy.Notes() {
				fmt.Fprintf(env.Stderr, "robotsgate check: note: %s\n", note)
			}
		}
	} else if *user != "" {
		fmt.Fprintln(env.Stderr, "robotsgate check: -user names a policy's crawler: give a policy with -policy FILE")
		return ExitUsage
	}
	if *robotsFile != "" {
		body, err := os.ReadFile(*robotsFile)
		if err != nil {
			fmt.Fprintf(env.Stderr, "robotsgate check: -robots: %v\n", err)
			return ExitUsage
		}
		c.file, c.fileName = env.Parser.Parse(body), *robotsFile
		c.reportIgnored(*robotsFile, c.file)
	} else if env.Fetcher == nil {
		why := env.NoFetcher
		if why == nil {
			why = errors.New("no robots.txt fetcher")
		}
		fmt.Fprintf(env.Stderr, "robotsgate check: robots.txt cannot be fetched: %v; or judge against a file with -robots FILE\n", why)
		return ExitUsage
	}

	c.userAgent = *userAgent
	if urls := flags.Args(); len(urls) > 0 {
		for _, u := range urls {
			if !c.check(ctx, u) {
				break
			}
		}
	} else {
		c.checkLines(ctx, env.Stdin)
		if c.checked == 0 && c.inputErrors == 0 && ctx.Err() == nil {
			fmt.Fprintln(env.Stderr, "robotsgate check: no URL given, in the arguments or on standard input")
			return ExitUsage
		}
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(env.Stderr, "robotsgate check: interrupted after %d URLs; the rest were not judged\n", c.checked)
		return ExitInterrupted
	case c.inputErrors > 0:
		return ExitUsage
	case c.disallowed > 0:
		return ExitDisallowed
	}
	return ExitAllowed
}

// checkLines judges the URLs read from r, one per line, until its end or
// until ctx ends: reading goes on in a goroutine of its own, so that an
// interrupt is not left waiting on a terminal that sends nothing.
func (c *checker) checkLines(ctx context.Context, r io.Reader) {
	lines := make(chan string)
	readErr := make(chan error, 1) // sent once, before lines closes
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				readErr <- nil
				return
			}
		}
		readErr <- sc.Err()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case line, ok := <-lines:
			if !ok {
				if err := <-readErr; err != nil {
					fmt.Fprintf(c.env.Stderr, "robotsgate check: reading URLs from standard input: %v\n", err)
					c.inputErrors++
				}
				return
			}
			if u := strings.TrimSpace(line); u != "" && !strings.HasPrefix(u, "#") && !c.check(ctx, u) {
				return
			}
		}
	}
}

type checker struct {
	env       Env
	userAgent string
	token     string
	json      bool
	file      *robots.Robots
	fileName  string
	// policy, when set, judges beside robots.txt, as user (a credential's
	// name, "" for anonymous); policyGiven says -policy named it, rather
	// than ROBOTSGATE_POLICY. bareSaid: bare paths were said to be judged
	// without the policy.
	policy                *policy.Policy
	user                  string
	policyGiven, bareSaid bool
	fetched               map[string]*fetch.Result // by origin: each is fetched once
	// purposes are the crawler's (-purpose, else ROBOTSGATE_PURPOSES');
	// without -purpose the policy's, where it declares some, come first.
	purposes     []string
	purposeGiven bool

	checked, disallowed, inputErrors int
}

// check judges one URL and prints the verdict. It returns false, having
// printed nothing, when ctx ended before the verdict was reached: a fetch
// cut short by an interrupt says nothing about the origin.
func (c *checker) check(ctx context.Context, rawURL string) bool {
	if ctx.Err() != nil {
		return false
	}
	out := robots.Decision{URL: rawURL, UserAgent: c.userAgent, Token: c.token}
	var v robots.Verdict
	var delay pace.Delay
	path := robots.PathAndQuery(rawURL)
	var match policy.Match
	if c.policy != nil {
		host, err := hostOf(rawURL)
		switch {
		case err != nil && c.policyGiven:
			fmt.Fprintf(c.env.Stderr, "robotsgate check: %q: %v (a policy judges by site: give whole URLs)\n", rawURL, err)
			c.inputErrors++
			return true
		case err != nil:
			if !c.bareSaid {
				c.bareSaid = true
				fmt.Fprintln(c.env.Stderr, "robotsgate check: bare paths are judged without the policy of ROBOTSGATE_POLICY, which judges by site: give whole URLs to judge with it")
			}
		default:
			match = c.policy.Match(c.user, c.token, host)
		}
		if f := match.Destination(); f != nil {
			// The proxy refuses before it looks robots.txt up: so does check.
			c.checked++
			c.disallowed++
			out.Verdict, out.Reason = robots.VerdictDisallow, "the operator's policy keeps this crawler off this site: "+f.String()
			return c.print(out, f, pace.Delay{}, usageJudgement{purposes: c.purposesOf(&match)})
		}
	}
	var lines []robots.UsageLine
	var tdm *usage.TDMRep
	if c.file != nil {
		out.RobotsTxt = c.fileName
		v = c.file.Check(c.token, path)
		delay = c.env.Pace.Delay(c.file.Pace(c.token))
		lines = c.file.Usage(c.token, path)
	} else {
		origin, err := robots.OriginOf(rawURL)
		if err != nil {
			fmt.Fprintf(c.env.Stderr, "robotsgate check: %q: %v (a URL with an http or https scheme and a host is needed to fetch its robots.txt)\n", rawURL, err)
			c.inputErrors++
			return true
		}
		result := c.fetched[origin]
		if result == nil {
			result = c.env.Fetcher.Fetch(ctx, origin)
			if ctx.Err() != nil {
				return false
			}
			c.fetched[origin] = result
			c.reportIgnored(origin+"/robots.txt", result.Robots)
		}
		out.RobotsTxt, out.RobotsOutcome, out.RobotsStatus = origin+"/robots.txt", result.Outcome.String(), int(result.Status)
		v = result.Check(c.token, path)
		delay = c.env.Pace.Delay(result.Pace(c.token))
		lines, tdm = result.Usage(c.token, path), result.TDMRep
	}
	c.checked++
	var decided *policy.Finding // what in the policy changed robots.txt's verdict
	// The proxy lets a GET of exactly /robots.txt through unjudged, policy
	// or not.
	if c.policy != nil && path != "/robots.txt" {
		if allowed, f := match.Judge(path, v); f != nil && (f.Kind != policy.KindRule || v.Allowed) {
			decided, v.Allowed = f, allowed
		}
		if floor, f := match.MinDelay(); f != nil {
			delay = delay.AtLeast(floor, pace.SourcePolicy)
		}
	}
	out.SetVerdict(v)
	if decided != nil {
		out.Reason = "policy: " + decided.String()
	}
	j := usageJudgement{purposes: c.purposesOf(&match)}
	if path != "/robots.txt" { // let through unjudged by the proxy, preferences too
		j.judge(lines, tdm, path)
	}
	if v.Allowed && j.verdict.Refused {
		out.Verdict, out.Reason = robots.VerdictDisallow, j.verdict.Reason()
		out.Rule, out.RuleLine = "", 0 // robots.txt's rule allowed it
		j.refused = true
	}
	if out.Verdict == robots.VerdictDisallow {
		c.disallowed++
	}
	return c.print(out, decided, delay, j)
}

// usageJudgement is what the site's usage preferences say of the crawler's
// purposes at one URL.
type usageJudgement struct {
	purposes []string
	stated   []usage.Statement
	verdict  usage.Verdict
	// refused: the preference refused a URL robots.txt allows.
	refused bool
}

// purposesOf are the crawler's purposes, as the proxy settles them:
// -purpose's, else the policy's for the crawler (match), else
// ROBOTSGATE_PURPOSES' for the pinned token.
func (c *checker) purposesOf(match *policy.Match) []string {
	if c.purposeGiven {
		return c.purposes
	}
	return usage.Union(match.Purposes(), c.purposes)
}

// judge judges j.purposes by the usage lines of robots.txt and tdmrep.json
// for path, as the proxy does before a fetch.
func (j *usageJudgement) judge(lines []robots.UsageLine, tdm *usage.TDMRep, path string) {
	j.stated = usage.FromRobots(lines)
	if tdm != nil {
		j.stated = append(j.stated, tdm.Statements(path)...)
	}
	j.verdict = usage.Judge(j.purposes, j.stated)
}

// hostOf is the canonical host of rawURL, as the proxy matches a policy's
// sites against it.
func hostOf(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "", errors.New("no host")
	}
	host := u.Hostname()
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // an IPv6 address, as CanonicalHost reads one
	}
	return robots.CanonicalHost(host)
}

// print writes the verdict out, with the policy finding that decided it
// (nil for none) and the delay the proxy would keep.
func (c *checker) print(out robots.Decision, decided *policy.Finding, delay pace.Delay, j usageJudgement) bool {
	if c.json {
		line := jsonLine{Decision: out, CrawlDelay: delay.Interval.Seconds(), CrawlDelaySource: delay.Source.String(), CrawlDelayLine: delay.Asked.Line}
		if decided != nil {
			line.Policy = audit.PolicyFinding{File: decided.File, Line: decided.Line, Kind: decided.Kind.String(), Rule: decided.Rule, Reason: decided.Reason}
		}
		line.Purposes, line.UsageStated = j.purposes, usage.Stated(j.stated)
		if j.refused {
			line.Usage = audit.UsageFindingOf(j.verdict, audit.UsageRefused)
		}
		text, _ := json.Marshal(line) // strings, numbers and bools only: cannot fail
		fmt.Fprintf(c.env.Stdout, "%s\n", text)
		return true
	}
	// The text columns predate the JSON words and are kept as they are.
	verdict := "allowed"
	if out.Verdict == robots.VerdictDisallow {
		verdict = "disallowed"
	}
	token := c.token
	if token == "" {
		token = "*"
	}
	if !c.purposeGiven {
		fmt.Fprintf(c.env.Stdout, "%s\t%s\t%s\t%s\n", verdict, token, out.URL, out.Reason)
		return true
	}
	stated := usage.Stated(j.stated)
	if len(stated) == 0 {
		stated = []string{"-"}
	}
	fmt.Fprintf(c.env.Stdout, "%s\t%s\t%s\t%s\t%s\n", verdict, token, out.URL, out.Reason, strings.Join(stated, ", "))
	return true
}

// jsonLine is one line of -json: the decision, and the pace the proxy
// would keep.
type jsonLine struct {
	robots.Decision
	CrawlDelay       float64 `json:"crawl_delay"`
	CrawlDelaySource string  `json:"crawl_delay_source,omitempty"`
	CrawlDelayLine   int     `json:"crawl_delay_line,omitempty"`
	// Policy is what in the operator's policy decided, in the audit
	// record's words.
	Policy audit.PolicyFinding `json:"policy,omitzero"`
	// Purposes, Usage and UsageStated are the crawler's purposes, the
	// usage preference that refused one, and the preferences that apply,
	// in the audit record's words.
	Purposes    []string           `json:"purposes,omitempty"`
	Usage       audit.UsageFinding `json:"usage,omitzero"`
	UsageStated []string           `json:"usage_stated,omitempty"`
}

// reportIgnored lists on standard error the lines of a robots.txt that did
// not count, so that a site owner sees what a crawler will not obey.
// Parsers and fetchers that keep no such lines (robots.Parser.KeepIgnored)
// report nothing.
func (c *checker) reportIgnored(name string, r *robots.Robots) {
	for _, l := range r.Ignored() {
		fmt.Fprintf(c.env.Stderr, "robotsgate check: %s: %s\n", name, l)
	}
}
