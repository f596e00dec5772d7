// Package checkcmd is the "robotsgate check" command: it tells site owners,
// crawler authors and tests whether a crawler may fetch URLs, and why,
// from a robots.txt file or each origin's live robots.txt.
package checkcmd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"robotsgate/robots"
)

// Exit statuses.
const (
	ExitAllowed    = 0 // every URL is allowed
	ExitDisallowed = 1 // at least one URL is disallowed
	ExitUsage      = 2 // a usage or input error; the message names it
)

// Fetcher fetches an origin's robots.txt; *robots.Fetcher is one.
type Fetcher interface {
	Fetch(ctx context.Context, origin string) *robots.FetchResult
}

// Env is what the command reads and writes.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Fetcher        Fetcher       // used when -robots is not given
	Parser         robots.Parser // parses a -robots file
}

const usage = `usage: robotsgate check -user-agent UA [-robots FILE] [-json] [URL ...]

Says, for each URL, whether the crawler may fetch it and why. URLs come
from the arguments, or one per line on standard input when there are none.
With -robots, every URL is judged against FILE (URLs may then be bare
paths); otherwise each origin's robots.txt is fetched once.

Output: one line per URL, tab-separated: allowed or disallowed, the product
token ("*" when the User-Agent has none), the URL, the reason.
Exit status: 0 all allowed, 1 any disallowed, 2 usage or input error.

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
	flags.Usage = func() {
		fmt.Fprint(env.Stderr, usage)
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
	c := &checker{env: env, token: robots.ProductToken(*userAgent), json: *asJSON, fetched: make(map[string]*robots.FetchResult)}
	if *robotsFile != "" {
		body, err := os.ReadFile(*robotsFile)
		if err != nil {
			fmt.Fprintf(env.Stderr, "robotsgate check: -robots: %v\n", err)
			return ExitUsage
		}
		c.file, c.fileName = env.Parser.Parse(body), *robotsFile
	} else if env.Fetcher == nil {
		fmt.Fprintln(env.Stderr, "robotsgate check: no robots.txt fetcher available; use -robots FILE")
		return ExitUsage
	}

	if urls := flags.Args(); len(urls) > 0 {
		for _, u := range urls {
			c.check(ctx, u)
		}
	} else {
		lines := bufio.NewScanner(env.Stdin)
		lines.Buffer(make([]byte, 64<<10), 1<<20)
		for lines.Scan() {
			if u := strings.TrimSpace(lines.Text()); u != "" && !strings.HasPrefix(u, "#") {
				c.check(ctx, u)
			}
		}
		if err := lines.Err(); err != nil {
			fmt.Fprintf(env.Stderr, "robotsgate check: reading URLs from standard input: %v\n", err)
			c.inputErrors++
		}
		if c.checked == 0 && c.inputErrors == 0 {
			fmt.Fprintln(env.Stderr, "robotsgate check: no URL given, in the arguments or on standard input")
			return ExitUsage
		}
	}
	switch {
	case c.inputErrors > 0:
		return ExitUsage
	case c.disallowed > 0:
		return ExitDisallowed
	}
	return ExitAllowed
}

type checker struct {
	env      Env
	token    string
	json     bool
	file     *robots.Robots
	fileName string
	fetched  map[string]*robots.FetchResult // by origin: each is fetched once

	checked, disallowed, inputErrors int
}

// verdictJSON is one line of -json output.
type verdictJSON struct {
	URL        string    `json:"url"`
	Token      string    `json:"token"`
	Allowed    bool      `json:"allowed"`
	Verdict    string    `json:"verdict"`
	Reason     string    `json:"reason"`
	Rule       *ruleJSON `json:"rule,omitempty"`
	Group      string    `json:"group,omitempty"`
	GroupLines []int     `json:"group_lines,omitempty"`
	Robots     string    `json:"robots"`                   // the file, or the robots.txt URL fetched
	Outcome    string    `json:"robots_outcome,omitempty"` // for a fetched robots.txt: ok, unavailable, unreachable
	Status     int       `json:"robots_status,omitempty"`
}

type ruleJSON struct {
	Directive string `json:"directive"`
	Pattern   string `json:"pattern"`
	Line      int    `json:"line"`
}

func (c *checker) check(ctx context.Context, rawURL string) {
	out := verdictJSON{URL: rawURL, Token: c.token}
	var v robots.Verdict
	path := robots.PathAndQuery(rawURL)
	if c.file != nil {
		out.Robots = c.fileName
		v = c.file.Check(c.token, path)
	} else {
		origin, err := robots.OriginOf(rawURL)
		if err != nil {
			fmt.Fprintf(c.env.Stderr, "robotsgate check: %q: %v (a URL with an http or https scheme and a host is needed to fetch its robots.txt)\n", rawURL, err)
			c.inputErrors++
			return
		}
		result := c.fetched[origin]
		if result == nil {
			result = c.env.Fetcher.Fetch(ctx, origin)
			c.fetched[origin] = result
		}
		out.Robots, out.Outcome, out.Status = origin+"/robots.txt", result.Outcome.String(), result.Status
		v = result.Check(c.token, path)
	}
	c.checked++
	out.Allowed, out.Reason, out.Group, out.GroupLines = v.Allowed, v.Reason(), v.Group, v.GroupLines
	out.Verdict = "allowed"
	if !v.Allowed {
		out.Verdict = "disallowed"
		c.disallowed++
	}
	if r := v.Rule; r != nil {
		out.Rule = &ruleJSON{Directive: "disallow", Pattern: r.Pattern, Line: r.Line}
		if r.Allow {
			out.Rule.Directive = "allow"
		}
	}
	if c.json {
		line, _ := json.Marshal(out) // strings, ints and bools only: cannot fail
		fmt.Fprintf(c.env.Stdout, "%s\n", line)
		return
	}
	token := c.token
	if token == "" {
		token = "*"
	}
	fmt.Fprintf(c.env.Stdout, "%s\t%s\t%s\t%s\n", out.Verdict, token, rawURL, out.Reason)
}
