package identity

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"robotsgate/robots"
)

// Credential is one line of a credentials file: a name, the bcrypt hash of
// its password and the product token its requests are judged as.
type Credential struct {
	Name  string
	Token string
	hash  []byte
}

// Credentials are the credentials of one file, by name.
type Credentials struct {
	byName map[string]*Credential
	// decoy is compared against for a name that is not in the file, so
	// that an unknown name takes as long as a wrong password.
	decoy []byte
}

// Len is the number of credentials.
func (c *Credentials) Len() int { return len(c.byName) }

// Lookup returns the credential called name, or nil.
func (c *Credentials) Lookup(name string) *Credential { return c.byName[name] }

// maxFileBytes bounds a credentials file: a million bcrypt lines fit.
const maxFileBytes = 64 << 20

// maxCost is the highest bcrypt cost accepted, htpasswd's own limit.
const maxCost = 17

// ParseCredentials parses an htpasswd file whose hashes are bcrypt (as
// "htpasswd -B" makes them): one "name:hash" or "name:hash:token" per
// line; blank lines and lines starting with "#" are skipped. Without a
// token the name is the token. Every problem is reported, each with its
// line number; other hash kinds are named so the operator knows which
// line to make again.
func ParseCredentials(data []byte) (*Credentials, error) {
	creds := &Credentials{byName: make(map[string]*Credential)}
	lineOf := make(map[string]int)
	var problems []error
	bad := func(n int, format string, args ...any) {
		problems = append(problems, fmt.Errorf("line %d: %s", n, fmt.Sprintf(format, args...)))
	}
	decoyCost := bcrypt.MinCost
	data = bytes.TrimPrefix(data, []byte("\xEF\xBB\xBF"))
	n := 0
	for line := range strings.Lines(string(data)) {
		n++
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, ":")
		name := fields[0]
		switch {
		case len(fields) < 2:
			bad(n, `not "name:hash" or "name:hash:token"`)
			continue
		case len(fields) > 3:
			bad(n, `more than three ":"-separated fields; use "name:hash" or "name:hash:token"`)
			continue
		case name == "":
			bad(n, "the name is empty")
			continue
		case strings.TrimSpace(name) != name:
			bad(n, "the name %q starts or ends with white space", name)
			continue
		}
		hash := fields[1]
		if kind := hashKind(hash); kind != "" {
			bad(n, "%q has %s; only bcrypt hashes are accepted: make the line again with htpasswd -B", name, kind)
			continue
		}
		cost, err := bcrypt.Cost([]byte(hash))
		if err != nil {
			bad(n, "%q has a malformed bcrypt hash (%v): make the line again with htpasswd -B", name, err)
			continue
		}
		if cost > maxCost {
			bad(n, "%q has a bcrypt cost of %d, above %d, the most htpasswd -C makes: each check would take minutes", name, cost, maxCost)
			continue
		}
		token := name
		if len(fields) == 3 {
			token = fields[2]
		}
		if !isToken(token) {
			if len(fields) == 3 {
				bad(n, "%q is not a product token (letters, digits and -_.!, as in a User-agent line)", token)
			} else {
				bad(n, "the name %q is not a product token; add a third field naming the token its requests are judged as (name:hash:GPTBot)", name)
			}
			continue
		}
		if first, dup := lineOf[name]; dup {
			bad(n, "%q is already defined on line %d", name, first)
			continue
		}
		lineOf[name] = n
		decoyCost = max(decoyCost, cost)
		creds.byName[name] = &Credential{Name: name, Token: token, hash: []byte(hash)}
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	if len(creds.byName) == 0 {
		return nil, errors.New("holds no credential; add lines with htpasswd -B FILE NAME")
	}
	decoy, err := bcrypt.GenerateFromPassword([]byte("robotsgate decoy"), decoyCost)
	if err != nil {
		return nil, fmt.Errorf("decoy hash: %w", err)
	}
	creds.decoy = decoy
	return creds, nil
}

// isToken reports whether s is one product name as a "User-agent:" line
// reads it, so that the group of that name applies to it.
func isToken(s string) bool {
	name, global := robots.ProductName(s)
	return !global && name != "" && name == s
}

// hashKind names a password hash that is not bcrypt, "" for bcrypt or
// something unrecognisable (which bcrypt.Cost then rejects).
func hashKind(hash string) string {
	switch {
	case strings.HasPrefix(hash, "$2a$"), strings.HasPrefix(hash, "$2b$"), strings.HasPrefix(hash, "$2y$"):
		return ""
	case strings.HasPrefix(hash, "$apr1$"):
		return "an Apache MD5 hash (htpasswd -m)"
	case strings.HasPrefix(hash, "{SHA}"):
		return "a SHA-1 hash (htpasswd -s)"
	case strings.HasPrefix(hash, "$1$"):
		return "an MD5-crypt hash"
	case strings.HasPrefix(hash, "$5$"):
		return "a SHA-256-crypt hash (htpasswd -2)"
	case strings.HasPrefix(hash, "$6$"):
		return "a SHA-512-crypt hash (htpasswd -5)"
	case len(hash) == 13 && !strings.HasPrefix(hash, "$"):
		return "a DES-crypt hash (htpasswd -d) or a plain-text password"
	case !strings.HasPrefix(hash, "$"):
		return "a plain-text password (htpasswd -p) or an unknown hash"
	}
	return ""
}
