package fleet

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// CheckURL reports what is wrong with raw as the address of the fleet's
// Redis: redis://[user:password@]host[:port][/db], or rediss:// for TLS.
// Its messages never repeat the user and password.
func CheckURL(raw string) error {
	_, err := parseURL(raw)
	return err
}

// redactedUser stands for the user and password in the URLs messages show.
const redactedUser = "xxxxx"

// parseURL checks raw and turns it into go-redis options. It reads the URL
// with the user and password replaced first, so that every message about
// the rest of it can quote it whole.
func parseURL(raw string) (*redis.Options, error) {
	schemeEnd := strings.Index(raw, "://")
	if schemeEnd < 0 {
		return nil, errors.New("redis URL must start with redis:// or rediss:// (TLS), as in redis://host:6379/0")
	}
	redacted := raw
	// The host and the database number never hold an '@': whatever comes
	// before the last one is the user and password, even when they were
	// not percent-encoded.
	rest := raw[schemeEnd+len("://"):]
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		if strings.ContainsAny(rest[:at], "/?#") {
			return nil, errors.New("redis URL: the user and password must percent-encode '/', '?' and '#'")
		}
		redacted = raw[:schemeEnd+len("://")] + redactedUser + rest[at:]
	}
	u, err := url.Parse(redacted)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return nil, fmt.Errorf("redis URL %q is not a valid URL: %w", redacted, err)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("redis URL %q: the scheme must be redis or rediss (TLS), not %q", redacted, u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("redis URL %q names no host", redacted)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("redis URL %q: the port must be a number from 1 to 65535", redacted)
		}
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		if _, err := strconv.ParseUint(db, 10, 31); err != nil {
			return nil, fmt.Errorf("redis URL %q: the path must be a database number (0 or more), as in /0, not %q", redacted, u.Path)
		}
	}
	if u.RawQuery != "" || u.ForceQuery {
		return nil, fmt.Errorf("redis URL %q: query parameters are not supported; robotsgate sets timeouts and retries itself", redacted)
	}
	if u.Fragment != "" || strings.Contains(redacted, "#") {
		return nil, fmt.Errorf("redis URL %q must not have a fragment (#...)", redacted)
	}
	// Only the user and password differ from what was read above: an
	// error now is theirs, and its text could quote them.
	if _, err := url.Parse(raw); err != nil {
		return nil, fmt.Errorf("redis URL %q: the user or password is not valid in a URL; percent-encode its special characters", redacted)
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("redis URL %q: %w", redacted, err)
	}
	return opts, nil
}
