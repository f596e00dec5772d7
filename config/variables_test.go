package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestVariablesCoverEveryField(t *testing.T) {
	t.Parallel()
	vars := Variables()
	typ := reflect.TypeFor[Config]()
	if len(vars) != typ.NumField() {
		t.Fatalf("Variables() has %d entries, Config has %d fields", len(vars), typ.NumField())
	}
	seen := map[string]bool{}
	for i, v := range vars {
		sf := typ.Field(i)
		if tag := sf.Tag.Get("env"); v.Name != "ROBOTSGATE_"+tag || tag == "" {
			t.Errorf("field %s: variable %q, env tag %q", sf.Name, v.Name, tag)
		}
		if seen[v.Name] {
			t.Errorf("variable %s is listed twice", v.Name)
		}
		seen[v.Name] = true
		if v.Description == "" || strings.ContainsAny(v.Description, "\r\n") {
			t.Errorf("%s: description %q must be one non-empty line", v.Name, v.Description)
		}
	}
	// The brief's public names, which must not drift.
	want := []string{
		"ROBOTSGATE_LISTEN", "ROBOTSGATE_MODE", "ROBOTSGATE_MITM", "ROBOTSGATE_CA_CERT", "ROBOTSGATE_CA_KEY",
		"ROBOTSGATE_CA_DIR", "ROBOTSGATE_UPSTREAM_CA_FILE", "ROBOTSGATE_LOG_FORMAT", "ROBOTSGATE_LOG_LEVEL",
		"ROBOTSGATE_AUDIT_LOG", "ROBOTSGATE_FETCH_TIMEOUT", "ROBOTSGATE_FETCH_CONNECT_TIMEOUT", "ROBOTSGATE_MAX_FETCHES", "ROBOTSGATE_MAX_FETCHES_PER_CLIENT",
		"ROBOTSGATE_FETCH_USER_AGENT", "ROBOTSGATE_ROBOTS_401_403", "ROBOTSGATE_PARSE_LIMIT",
		"ROBOTSGATE_CACHE_MAX_BYTES", "ROBOTSGATE_CACHE_MAX_AGE", "ROBOTSGATE_CACHE_MIN_AGE",
		"ROBOTSGATE_UNREACHABLE_RETRY", "ROBOTSGATE_MAX_STALE", "ROBOTSGATE_UPSTREAM_DIAL_TIMEOUT",
		"ROBOTSGATE_UPSTREAM_TLS_TIMEOUT", "ROBOTSGATE_UPSTREAM_HEADER_TIMEOUT", "ROBOTSGATE_UPSTREAM_IDLE_TIMEOUT", "ROBOTSGATE_UPSTREAM_PROXY",
		"ROBOTSGATE_CLIENT_IDLE_TIMEOUT", "ROBOTSGATE_SHUTDOWN_GRACE",
		"ROBOTSGATE_CLIENT_HEADER_TIMEOUT", "ROBOTSGATE_CLIENT_TLS_TIMEOUT", "ROBOTSGATE_MAX_HEADER_BYTES",
		"ROBOTSGATE_MAX_URL_BYTES", "ROBOTSGATE_MAX_CONNECTIONS", "ROBOTSGATE_UPSTREAM_IDLE_CONNS", "ROBOTSGATE_DENY_DESTINATIONS",
		"ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT",
		"ROBOTSGATE_AUDIT_ON_ERROR", "ROBOTSGATE_TOKEN", "ROBOTSGATE_CREDENTIALS_FILE", "ROBOTSGATE_POLICY", "ROBOTSGATE_USAGE", "ROBOTSGATE_USAGE_RESPONSES", "ROBOTSGATE_PURPOSES", "ROBOTSGATE_TDMREP", "ROBOTSGATE_SIGNING_KEY", "ROBOTSGATE_SIGNATURE_AGENT", "ROBOTSGATE_SIGNATURE_TTL", "ROBOTSGATE_WATCH_INTERVAL", "ROBOTSGATE_AUTH", "ROBOTSGATE_PID_FILE",
		"ROBOTSGATE_CRAWL_DELAY", "ROBOTSGATE_DEFAULT_CRAWL_DELAY", "ROBOTSGATE_MAX_CRAWL_DELAY", "ROBOTSGATE_MAX_WAIT", "ROBOTSGATE_MAX_CONNS_PER_ORIGIN",
		"ROBOTSGATE_MAX_SCHEDULES_PER_CLIENT",
		"ROBOTSGATE_MAX_BACKOFF", "ROBOTSGATE_BACKOFF_BASE", "ROBOTSGATE_DELAY_FACTOR", "ROBOTSGATE_MIN_DELAY", "ROBOTSGATE_PACE_BY",
		"ROBOTSGATE_REDIS_URL", "ROBOTSGATE_REDIS_TIMEOUT", "ROBOTSGATE_REDIS_PREFIX", "ROBOTSGATE_REDIS_CA_FILE",
	}
	for _, name := range want {
		if !seen[name] {
			t.Errorf("Variables() lacks %s", name)
		}
	}
	if len(want) != len(vars) {
		t.Errorf("Variables() has %d names, the public list %d", len(vars), len(want))
	}
}

// TestVariablesDefaultsAreTheDefaults sets every variable to the default
// Variables documents and checks the result is what an empty environment
// gives, so the documented defaults cannot drift from the real ones. A
// default derived from other settings is documented in words that must
// name the plain default, which is what the variable is set to here.
func TestVariablesDefaultsAreTheDefaults(t *testing.T) {
	t.Parallel()
	environ := map[string]string{}
	for _, f := range fields() {
		v := f.Variable
		switch {
		case v.Name == "ROBOTSGATE_CA_DIR":
			if !strings.HasSuffix(v.Default, "/robotsgate") {
				t.Errorf("documented CA_DIR default %q does not end in /robotsgate", v.Default)
			}
			continue // a description, not a value
		case strings.HasPrefix(v.Default, "derived: "):
			if f.envDefault == "" || !strings.Contains(v.Default, f.envDefault) {
				t.Errorf("%s: documented default %q does not name the plain default %q", v.Name, v.Default, f.envDefault)
			}
			environ[v.Name] = f.envDefault
		default:
			environ[v.Name] = v.Default
		}
	}
	got, err := LoadFrom(environ)
	if err != nil {
		t.Fatalf("LoadFrom(documented defaults) = %v", err)
	}
	want := defaults()
	want.CADir = got.CADir
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("documented defaults give\n%+v\nwant\n%+v", *got, want)
	}
}
