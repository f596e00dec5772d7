// Package settings is the "robotsgate config" command: it shows every
// setting's value in force and where it came from, so that an operator
// can check a deployment before starting it.
package settings

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	envlib "github.com/caarlos0/env/v11"

	"robotsgate/config"
	"robotsgate/proxy/policy"
)

// Exit statuses.
const (
	ExitValid   = 0 // the configuration is valid; every setting was printed
	ExitOutput  = 1 // the settings could not be written out (the configuration may be valid)
	ExitInvalid = 2 // the configuration is invalid (each variable at fault is named), or a usage error
)

// Env is what the command reads and writes.
type Env struct {
	Stdout, Stderr io.Writer
	Environ        []string // the environment, "NAME=value" each, as os.Environ gives it
	Version        string   // completes the default ROBOTSGATE_FETCH_USER_AGENT
}

const usage = `usage: robotsgate config [-json]

Prints every ROBOTSGATE_* setting with the value "robotsgate serve" would
use and where it came from: environment (the variable is set), default,
derived from ROBOTSGATE_X (unset, and worked out from that setting), or
from the machine (unset, and taken from the user's config directory).
Secrets are masked: the password in a URL shows as ****.
The configuration is checked as serve checks it, but nothing is started:
no port is opened, no file is written, Redis is not contacted.

Output: a table with the columns NAME, VALUE and SOURCE; an empty value
shows as "", a value with unprintable characters quoted. With
ROBOTSGATE_POLICY set, the policy file is read and checked as serve reads
it, and a last line says its version and what it holds.
With -json, one object {"settings": [...]} listing, in the same order,
{"name", "value", "source", "from"}: source is environment, default,
derived or machine; from, only for the last two, names the variable the
value was derived from, or what of the machine it was taken from; and,
with a policy, "policy": {"file", "version", "entries"}.
Exit status: 0 the configuration is valid, 2 it is not (standard error
names each variable at fault, as serve's message does) or a usage error,
1 the output could not be written.

Flags:
`

// Run runs the command with args (after "config") and returns the exit
// status.
func Run(args []string, env Env) int {
	flags := flag.NewFlagSet("robotsgate config", flag.ContinueOnError)
	flags.SetOutput(env.Stderr)
	asJSON := flags.Bool("json", false, `print one JSON object, {"settings": [{"name", "value", "source", "from"}, ...]}`)
	flags.Usage = func() {
		fmt.Fprint(env.Stderr, usage)
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitValid
		}
		return ExitInvalid
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "robotsgate config takes no arguments (got %q); it reads the ROBOTSGATE_* variables\n", flags.Args())
		return ExitInvalid
	}
	cfg, settings, err := config.Effective(envlib.ToMap(env.Environ), env.Version)
	if err != nil {
		// The words of "robotsgate serve", so that one check serves both.
		fmt.Fprintf(env.Stderr, "robotsgate: invalid configuration:\n%v\n", err)
		return ExitInvalid
	}
	var pol *policyFile
	if cfg.PolicyFile != "" {
		p, err := policy.LoadOptions(cfg.PolicyFile, cfg.PolicyOptions())
		if err != nil {
			fmt.Fprintf(env.Stderr, "robotsgate: invalid configuration:\nROBOTSGATE_POLICY: %v\n", err)
			return ExitInvalid
		}
		pol = &policyFile{File: p.File(), Version: p.Version(), Entries: p.Summary()}
	}
	if *asJSON {
		err = writeJSON(env.Stdout, settings, pol)
	} else {
		err = writeTable(env.Stdout, settings, pol)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "robotsgate config: %v\n", err)
		return ExitOutput
	}
	return ExitValid
}

// policyFile is the policy file serve would load: which, its version (as
// /healthz and the audit records name it) and what it holds.
type policyFile struct {
	File    string `json:"file"`
	Version string `json:"version"`
	Entries string `json:"entries"`
}

// writeJSON writes the settings as the usage text describes.
func writeJSON(w io.Writer, settings []config.Setting, pol *policyFile) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // a User-Agent's "<" and ">" stay readable
	if err := enc.Encode(struct {
		Settings []config.Setting `json:"settings"`
		Policy   *policyFile      `json:"policy,omitempty"`
	}{settings, pol}); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}

// writeTable writes the settings as an aligned table.
func writeTable(w io.Writer, settings []config.Setting, pol *policyFile) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVALUE\tSOURCE")
	for _, s := range settings {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, tableValue(s.Value), s.SourceText())
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the table: %w", err)
	}
	if pol != nil {
		if _, err := fmt.Fprintf(w, "\npolicy: %s version %s (%s)\n", pol.File, pol.Version, pol.Entries); err != nil {
			return fmt.Errorf("writing the policy line: %w", err)
		}
	}
	return nil
}

// tableValue quotes a value that would not read as itself in a table
// cell: empty, edged with spaces, or holding a tab, newline or other
// unprintable character.
func tableValue(v string) string {
	if v == "" || strings.TrimSpace(v) != v || strings.ContainsFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(v)
	}
	return v
}
