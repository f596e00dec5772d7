// Package keygen is the "robotsgate keygen" command: it writes a new
// Ed25519 signing key for Web Bot Auth to a file only its owner may read,
// never over an existing one, and prints what sites will see of it: its
// key id and public JWK.
package keygen

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"robotsgate/proxy/signing"
)

// Exit statuses.
const (
	ExitOK = 0
	// ExitFailed: the key could not be written (the file exists, its
	// folder does not, the disk refused); no file was left behind.
	ExitFailed = 1
	// ExitUsage: a usage error; nothing was written.
	ExitUsage = 2
)

// Env is what the command reads and writes.
type Env struct {
	Stdout, Stderr io.Writer
	Now            func() time.Time // the clock durations count from; time.Now when nil
}

const usage = `usage: robotsgate keygen [-format pem|jwk] [-not-before T] [-not-after T] [-json] FILE

Writes a new Ed25519 private key for signing requests (Web Bot Auth) to
FILE, readable by its owner alone (mode 0600). An existing FILE is never
overwritten. The key goes to a file only, never to standard output:
terminals and logs keep what they show.

The format is PEM (PKCS #8, as openssl genpkey -algorithm ed25519 writes
it), or a JWK when FILE ends in .jwk or .json or with -format jwk.
-not-before and -not-after bound when the key signs (for rotation: the
newest valid key of an identity signs); only a JWK carries them. T is an
RFC 3339 time (2026-12-01T00:00:00Z) or a duration from now (720h, 90d,
-1h). -not-after must be in the future and after -not-before.

Prints the key id (its JWK thumbprint, RFC 7638, the keyid of every
signature it makes), its public JWK as the key directory lists it, and how
to use it; with -json, one object instead: {"file", "keyid", "jwk"}.

Exit status: 0 written, 1 not written (FILE exists, its folder does not,
or writing failed), 2 usage error.

Flags:
`

// agentExample is the Signature-Agent URL the next steps show.
const agentExample = "https://your-crawler.example"

// Run runs the command with args (after "keygen") and returns the exit
// status.
func Run(args []string, env Env) int {
	flags := flag.NewFlagSet("robotsgate keygen", flag.ContinueOnError)
	flags.SetOutput(env.Stderr)
	format := flags.String("format", "", "pem or jwk (default: jwk when FILE ends in .jwk or .json, else pem)")
	notBefore := flags.String("not-before", "", "the key signs from T on (JWK only)")
	notAfter := flags.String("not-after", "", "the key signs until T, excluded (JWK only)")
	asJSON := flags.Bool("json", false, "print one JSON object: file, keyid, jwk")
	flags.Usage = func() {
		fmt.Fprint(env.Stderr, usage)
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	fail := func(status int, format string, args ...any) int {
		fmt.Fprintf(env.Stderr, "robotsgate keygen: "+format+"\n", args...)
		return status
	}

	switch rest := flags.Args(); {
	case len(rest) == 0:
		return fail(ExitUsage, "no FILE: name the file to write the key to (robotsgate keygen -h for help)")
	case len(rest) > 1:
		return fail(ExitUsage, "one FILE expected, got %d arguments %q (flags go before FILE)", len(rest), rest)
	}
	file := flags.Arg(0)
	if file == "-" {
		return fail(ExitUsage, `FILE "-": the key is written to a file only; a private key on standard output ends up in terminals and logs`)
	}
	jwk := false
	switch strings.ToLower(*format) {
	case "":
		ext := strings.ToLower(filepath.Ext(file))
		jwk = ext == ".jwk" || ext == ".json"
	case "jwk":
		jwk = true
	case "pem":
	default:
		return fail(ExitUsage, "-format %q is not one of pem, jwk", *format)
	}

	now := time.Now
	if env.Now != nil {
		now = env.Now
	}
	t := now()
	nbf, err := parseTime(*notBefore, t)
	if err != nil {
		return fail(ExitUsage, "-not-before: %v", err)
	}
	exp, err := parseTime(*notAfter, t)
	if err != nil {
		return fail(ExitUsage, "-not-after: %v", err)
	}
	// A JWK holds whole seconds: the bounds are checked as they will be kept.
	nbf, exp = nbf.Truncate(time.Second), exp.Truncate(time.Second)
	if (!nbf.IsZero() || !exp.IsZero()) && !jwk {
		return fail(ExitUsage, "-not-before and -not-after need a JWK: PEM carries no validity; name the file %s, or give -format jwk", jwkName(file))
	}
	if !exp.IsZero() {
		if !nbf.IsZero() && !exp.After(nbf) {
			return fail(ExitUsage, "-not-after (%s) is not after -not-before (%s)", stamp(exp), stamp(nbf))
		}
		if !exp.After(t) {
			return fail(ExitUsage, "-not-after (%s) is not in the future: the key could never sign", stamp(exp))
		}
	}

	key, err := signing.GenerateKey(rand.Reader, nbf, exp)
	if err != nil {
		return fail(ExitFailed, "%v", err)
	}
	data := key.MarshalJWK()
	if !jwk {
		if data, err = key.MarshalPEM(); err != nil {
			return fail(ExitFailed, "%v", err)
		}
	}
	if err := writeNew(file, data); err != nil {
		return fail(ExitFailed, "%v", err)
	}

	public := key.PublicJWK()
	if *asJSON {
		out, _ := json.Marshal(struct { // strings and numbers: cannot fail
			File  string      `json:"file"`
			KeyID string      `json:"keyid"`
			JWK   signing.JWK `json:"jwk"`
		}{file, key.ID(), public})
		fmt.Fprintf(env.Stdout, "%s\n", out)
		return ExitOK
	}
	line, _ := json.Marshal(public) // strings and numbers: cannot fail
	fmt.Fprintf(env.Stdout, "%s: new Ed25519 key, keyid %s%s\n%s\n", file, key.ID(), validity(key), line)
	fmt.Fprintf(env.Stdout, "sign as the pinned token: ROBOTSGATE_TOKEN=YourBot ROBOTSGATE_SIGNING_KEY=%s ROBOTSGATE_SIGNATURE_AGENT=%s\n", shellWord(file), agentExample)
	fmt.Fprintf(env.Stdout, "or as a credential user: in the policy, under its user entry, signing_keys: [%s]\n", yamlScalar(file))
	return ExitOK
}

// writeNew writes data to a new file of mode 0600. O_EXCL makes creating
// and the check that nothing is there one step: an existing file, or a
// symbolic link, is never written through.
func writeNew(file string, data []byte) error {
	dir := filepath.Dir(file)
	switch fi, err := os.Stat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("folder %s does not exist; create it first, or choose another", dir)
	case err != nil:
		return fmt.Errorf("folder %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a folder", dir)
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists; keys are never overwritten: choose another name, or remove it first", file)
	}
	if err != nil {
		return fmt.Errorf("create the key file: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync() // a key reported written is on disk
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// The file is this run's own, half written: it must not pass for a key.
		return errors.Join(fmt.Errorf("write %s: %w", file, err), os.Remove(file))
	}
	return nil
}

// parseTime reads T: "" (no bound), an RFC 3339 time, or a duration from
// now (Go's, or whole days: 90d).
func parseTime(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(d), nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n > -1e6 && n < 1e6 {
			return now.AddDate(0, 0, n), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-12-01T00:00:00Z) nor a duration from now (720h, 90d)", s)
}

// jwkName is file with the extension .jwk, for the usage error's advice.
func jwkName(file string) string {
	return strings.TrimSuffix(file, filepath.Ext(file)) + ".jwk"
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// validity says the key's bounds, if any, for the first line.
func validity(k *signing.Key) string {
	switch {
	case !k.NotBefore.IsZero() && !k.NotAfter.IsZero():
		return ", valid from " + stamp(k.NotBefore) + " until " + stamp(k.NotAfter)
	case !k.NotBefore.IsZero():
		return ", valid from " + stamp(k.NotBefore)
	case !k.NotAfter.IsZero():
		return ", valid until " + stamp(k.NotAfter)
	}
	return ""
}

// plain reports whether a file name needs no quoting in a shell or in
// YAML: letters, digits and _ . / + -, not first a -.
func plain(file string) bool {
	for i, r := range file {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./+", r) || r == '-' && i > 0
		if !ok {
			return false
		}
	}
	return file != ""
}

// shellWord quotes file for a POSIX shell when it needs it.
func shellWord(file string) string {
	if plain(file) {
		return file
	}
	return "'" + strings.ReplaceAll(file, "'", `'\''`) + "'"
}

// yamlScalar quotes file for a YAML flow sequence when it needs it; a
// JSON string is a YAML double-quoted scalar.
func yamlScalar(file string) string {
	if plain(file) {
		return file
	}
	q, _ := json.Marshal(file) // a string: cannot fail
	return string(q)
}
