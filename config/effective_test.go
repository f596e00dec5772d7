package config

import (
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"robotsgate/robots/fetch"
)

// settingsByName indexes Effective's settings, failing on a duplicate.
func settingsByName(t *testing.T, settings []Setting) map[string]Setting {
	t.Helper()
	byName := make(map[string]Setting, len(settings))
	for _, s := range settings {
		if _, dup := byName[s.Name]; dup {
			t.Fatalf("%s is listed twice", s.Name)
		}
		byName[s.Name] = s
	}
	return byName
}

// TestEffectiveSources checks each value's source, and that every default
// worked out from another setting says which.
func TestEffectiveSources(t *testing.T) {
	t.Parallel()
	credentials := writeFile(t, t.TempDir(), "htpasswd", "bot:$2y$05$abcdefghijklmnopqrstuu5Yo7eOyNBD0XrDWVmp.W6YGbyaXv7y\n")
	for _, c := range []struct {
		name    string
		environ map[string]string
		want    map[string]Setting // Name left out
	}{
		{"nothing set", nil, map[string]Setting{
			"ROBOTSGATE_LISTEN":                     {Value: "127.0.0.1:8080", Source: SourceDefault},
			"ROBOTSGATE_CRAWL_DELAY":                {Value: "enforce", Source: SourceDefault},
			"ROBOTSGATE_MAX_WAIT":                   {Value: "1m", Source: SourceDefault},
			"ROBOTSGATE_AUTH":                       {Value: "off", Source: SourceDefault},
			"ROBOTSGATE_FETCH_CONNECT_TIMEOUT":      {Value: "3s", Source: SourceDefault},
			"ROBOTSGATE_CACHE_MIN_AGE":              {Value: "1m", Source: SourceDefault},
			"ROBOTSGATE_MAX_FETCHES_PER_CLIENT":     {Value: "64", Source: SourceDerived, From: "ROBOTSGATE_MAX_FETCHES"},
			"ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT": {Value: "1024", Source: SourceDerived, From: "ROBOTSGATE_MAX_CONNECTIONS"},
			"ROBOTSGATE_TOKEN":                      {Value: "", Source: SourceDefault},
			"ROBOTSGATE_FETCH_USER_AGENT":           {Value: fetch.DefaultUserAgent("v1.2.3"), Source: SourceDefault},
			"ROBOTSGATE_LOG_LEVEL":                  {Value: "info", Source: SourceDefault},
			"ROBOTSGATE_PARSE_LIMIT":                {Value: "500 KiB", Source: SourceDefault},
			"ROBOTSGATE_MAX_STALE":                  {Value: "720h", Source: SourceDefault},
			"ROBOTSGATE_REDIS_TIMEOUT":              {Value: "200ms", Source: SourceDefault},
			"ROBOTSGATE_UPSTREAM_PROXY":             {Value: "", Source: SourceDefault},
			"ROBOTSGATE_DENY_DESTINATIONS":          {Value: "169.254.0.0/16,fe80::/10,0.0.0.0/8,::/128", Source: SourceDefault},
		}},
		{"audit mode", map[string]string{"ROBOTSGATE_MODE": "audit"}, map[string]Setting{
			"ROBOTSGATE_MODE":        {Value: "audit", Source: SourceEnvironment},
			"ROBOTSGATE_CRAWL_DELAY": {Value: "audit", Source: SourceDerived, From: "ROBOTSGATE_MODE"},
		}},
		{"audit mode, crawl delay set", map[string]string{"ROBOTSGATE_MODE": "audit", "ROBOTSGATE_CRAWL_DELAY": "wait"}, map[string]Setting{
			"ROBOTSGATE_CRAWL_DELAY": {Value: "wait", Source: SourceEnvironment},
		}},
		{"short idle timeout", map[string]string{"ROBOTSGATE_CLIENT_IDLE_TIMEOUT": "30s"}, map[string]Setting{
			"ROBOTSGATE_CLIENT_IDLE_TIMEOUT": {Value: "30s", Source: SourceEnvironment},
			"ROBOTSGATE_MAX_WAIT":            {Value: "15s", Source: SourceDerived, From: "ROBOTSGATE_CLIENT_IDLE_TIMEOUT"},
		}},
		{"idle timeout above the wait", map[string]string{"ROBOTSGATE_CLIENT_IDLE_TIMEOUT": "100s"}, map[string]Setting{
			"ROBOTSGATE_MAX_WAIT": {Value: "1m", Source: SourceDefault},
		}},
		{"credentials", map[string]string{"ROBOTSGATE_CREDENTIALS_FILE": credentials}, map[string]Setting{
			"ROBOTSGATE_CREDENTIALS_FILE": {Value: credentials, Source: SourceEnvironment},
			"ROBOTSGATE_AUTH":             {Value: "required", Source: SourceDerived, From: "ROBOTSGATE_CREDENTIALS_FILE"},
		}},
		{"short fetch timeout", map[string]string{"ROBOTSGATE_FETCH_TIMEOUT": "2s"}, map[string]Setting{
			"ROBOTSGATE_FETCH_CONNECT_TIMEOUT": {Value: "2s", Source: SourceDerived, From: "ROBOTSGATE_FETCH_TIMEOUT"},
		}},
		{"short cache age", map[string]string{"ROBOTSGATE_CACHE_MAX_AGE": "30s"}, map[string]Setting{
			"ROBOTSGATE_CACHE_MIN_AGE": {Value: "30s", Source: SourceDerived, From: "ROBOTSGATE_CACHE_MAX_AGE"},
		}},
		{"fewer fetches and connections", map[string]string{"ROBOTSGATE_MAX_FETCHES": "10", "ROBOTSGATE_MAX_CONNECTIONS": "3"}, map[string]Setting{
			"ROBOTSGATE_MAX_FETCHES_PER_CLIENT":     {Value: "2", Source: SourceDerived, From: "ROBOTSGATE_MAX_FETCHES"},
			"ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT": {Value: "1", Source: SourceDerived, From: "ROBOTSGATE_MAX_CONNECTIONS"},
		}},
		{"shares set", map[string]string{"ROBOTSGATE_MAX_FETCHES_PER_CLIENT": "5", "ROBOTSGATE_LOG_LEVEL": "WARN"}, map[string]Setting{
			"ROBOTSGATE_MAX_FETCHES_PER_CLIENT": {Value: "5", Source: SourceEnvironment},
			"ROBOTSGATE_LOG_LEVEL":              {Value: "warn", Source: SourceEnvironment},
		}},
		{"empty counts as unset", map[string]string{"ROBOTSGATE_LISTEN": ""}, map[string]Setting{
			"ROBOTSGATE_LISTEN": {Value: "127.0.0.1:8080", Source: SourceDefault},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, settings, err := Effective(c.environ, "v1.2.3")
			if err != nil {
				t.Fatalf("Effective = %v", err)
			}
			byName := settingsByName(t, settings)
			for name, want := range c.want {
				want.Name = name
				if got := byName[name]; got != want {
					t.Errorf("got  %+v\nwant %+v", got, want)
				}
			}
			caDir := byName["ROBOTSGATE_CA_DIR"]
			if caDir.Source != SourceMachine || caDir.From != userConfigDir || caDir.SourceText() != "from the machine (the user's config directory)" {
				t.Errorf("ROBOTSGATE_CA_DIR unset: %+v, %q", caDir, caDir.SourceText())
			}
			if base, err := os.UserConfigDir(); err == nil && caDir.Value != filepath.Join(base, "robotsgate") {
				t.Errorf("ROBOTSGATE_CA_DIR = %q, want it under %q", caDir.Value, base)
			}
		})
	}
}

// TestEffectiveIsWhatThePartsGet: a derived value shown is the one the
// options of each part carry, for the environments that change them.
func TestEffectiveIsWhatThePartsGet(t *testing.T) {
	t.Parallel()
	credentials := writeFile(t, t.TempDir(), "htpasswd", "bot:$2y$05$abcdefghijklmnopqrstuu5Yo7eOyNBD0XrDWVmp.W6YGbyaXv7y\n")
	for _, environ := range []map[string]string{
		nil,
		{"ROBOTSGATE_MODE": "audit", "ROBOTSGATE_CLIENT_IDLE_TIMEOUT": "30s", "ROBOTSGATE_CREDENTIALS_FILE": credentials},
		{"ROBOTSGATE_FETCH_TIMEOUT": "2s", "ROBOTSGATE_CACHE_MAX_AGE": "30s", "ROBOTSGATE_MAX_FETCHES": "10", "ROBOTSGATE_MAX_CONNECTIONS": "3"},
	} {
		cfg, settings, err := Effective(environ, "v1.2.3")
		if err != nil {
			t.Fatalf("Effective(%v) = %v", environ, err)
		}
		byName := settingsByName(t, settings)
		fetchOpts := cfg.FetchOptions("v1.2.3", nil, cfg.Destinations(), nil)
		pace := cfg.PaceOptions()
		for name, want := range map[string]string{
			"ROBOTSGATE_CRAWL_DELAY":                string(pace.Mode),
			"ROBOTSGATE_MAX_WAIT":                   formatDuration(pace.MaxWait),
			"ROBOTSGATE_AUTH":                       string(cfg.IdentityOptions(nil).Mode),
			"ROBOTSGATE_FETCH_CONNECT_TIMEOUT":      formatDuration(fetchOpts.ConnectTimeout),
			"ROBOTSGATE_MAX_FETCHES_PER_CLIENT":     formatValue(fetchOpts.MaxPerClient),
			"ROBOTSGATE_FETCH_USER_AGENT":           fetchOpts.UserAgent,
			"ROBOTSGATE_CACHE_MIN_AGE":              formatDuration(cfg.CacheOptions(nil).MinAge),
			"ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT": formatValue(cfg.ClientLimits().MaxConnectionsPerClient),
		} {
			if got := byName[name].Value; got != want {
				t.Errorf("%v: %s shown as %q, its part gets %q", environ, name, got, want)
			}
		}
	}
}

// TestEffectiveValuesLoadBack sets every variable to the value Effective
// shows and checks the configuration is the same: every value is written
// as configuration accepts it, and is the one in force. Masked secrets
// cannot load back and are left out.
func TestEffectiveValuesLoadBack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	credentials := writeFile(t, dir, "htpasswd", "bot:$2y$05$abcdefghijklmnopqrstuu5Yo7eOyNBD0XrDWVmp.W6YGbyaXv7y\n")
	for _, environ := range []map[string]string{
		nil,
		{"ROBOTSGATE_MODE": "audit", "ROBOTSGATE_CLIENT_IDLE_TIMEOUT": "30s", "ROBOTSGATE_CREDENTIALS_FILE": credentials,
			"ROBOTSGATE_MAX_STALE": "1h0m30s", "ROBOTSGATE_PARSE_LIMIT": "1500000", "ROBOTSGATE_LOG_LEVEL": "DEBUG",
			"ROBOTSGATE_DENY_DESTINATIONS": "none", "ROBOTSGATE_CA_DIR": filepath.Join(dir, "ca dir")},
		{"ROBOTSGATE_FETCH_TIMEOUT": "2s", "ROBOTSGATE_CACHE_MAX_AGE": "90m", "ROBOTSGATE_MAX_FETCHES": "10", "ROBOTSGATE_MAX_CONNECTIONS": "3",
			"ROBOTSGATE_UPSTREAM_PROXY": "http://user:pass@127.0.0.1:3128", "ROBOTSGATE_REDIS_URL": "redis://:pass@127.0.0.1:6379/1",
			"ROBOTSGATE_FETCH_USER_AGENT": "MyGate/1.0", "ROBOTSGATE_DENY_DESTINATIONS": "10.0.0.1, 192.168.0.0/16"},
	} {
		cfg, settings, err := Effective(environ, "v1.2.3")
		if err != nil {
			t.Fatalf("Effective(%v) = %v", environ, err)
		}
		shown := make(map[string]string)
		for _, f := range fields() {
			if f.secret {
				if v := environ[f.Name]; v != "" {
					shown[f.Name] = v
				}
			}
		}
		for _, s := range settings {
			if _, secret := shown[s.Name]; !secret && s.Value != "" {
				shown[s.Name] = s.Value
			}
		}
		again, err := LoadFrom(shown)
		if err != nil {
			t.Fatalf("%v: the values shown do not load: %v", environ, err)
		}
		// Unset, the User-Agent is filled in when fetching; shown, it is set.
		if cfg.FetchUserAgent == "" && again.FetchUserAgent == fetch.DefaultUserAgent("v1.2.3") {
			again.FetchUserAgent = ""
		}
		if !reflect.DeepEqual(again, cfg) {
			t.Errorf("%v: the values shown load as\n%+v\nnot\n%+v", environ, *again, *cfg)
		}
	}
}

// TestEffectiveMasksSecrets: a secret setting's password is never shown,
// however it is written.
func TestEffectiveMasksSecrets(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		environ map[string]string
		secret  string
		want    map[string]string
	}{
		{map[string]string{"ROBOTSGATE_REDIS_URL": "redis://default:Hunter2secret@127.0.0.1:6379/3"}, "Hunter2secret",
			map[string]string{"ROBOTSGATE_REDIS_URL": "redis://default:****@127.0.0.1:6379/3"}},
		{map[string]string{"ROBOTSGATE_REDIS_URL": "rediss://:Hunter2secret@redis.example:6380"}, "Hunter2secret",
			map[string]string{"ROBOTSGATE_REDIS_URL": "rediss://:****@redis.example:6380"}},
		{map[string]string{"ROBOTSGATE_REDIS_URL": "redis://Hunter2secret@127.0.0.1:6379"}, "Hunter2secret",
			map[string]string{"ROBOTSGATE_REDIS_URL": "redis://****@127.0.0.1:6379"}},
		// A '@' and ':' in the password, not percent-encoded.
		{map[string]string{"ROBOTSGATE_REDIS_URL": "redis://u:Hun@ter:2secret@127.0.0.1:6379"}, "ter:2secret",
			map[string]string{"ROBOTSGATE_REDIS_URL": "redis://u:****@127.0.0.1:6379"}},
		{map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://crawler:Hunter2%2Fsecret@127.0.0.1:3128"}, "Hunter2",
			map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://crawler:****@127.0.0.1:3128"}},
		{map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://127.0.0.1:3128"}, "",
			map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://127.0.0.1:3128"}},
	} {
		_, settings, err := Effective(c.environ, "v1.2.3")
		if err != nil {
			t.Fatalf("Effective(%v) = %v", c.environ, err)
		}
		byName := settingsByName(t, settings)
		for name, want := range c.want {
			if got := byName[name]; got.Value != want || got.Source != SourceEnvironment {
				t.Errorf("%s: %+v, want the value %q from the environment", name, got, want)
			}
		}
		for _, s := range settings {
			if c.secret != "" && strings.Contains(s.Value, c.secret) {
				t.Errorf("%s shows the secret: %q", s.Name, s.Value)
			}
		}
	}
	// A secret that is not a URL is hidden whole.
	if got := maskSecret("Hunter2secret"); got != "****" {
		t.Errorf("maskSecret(a password) = %q", got)
	}
}

// TestSecretSettingsAreTagged: a setting that may hold a URL may hold a
// password, and must be masked.
func TestSecretSettingsAreTagged(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[Config]()
	for _, f := range fields() {
		sf, _ := typ.FieldByName(f.goName)
		if (sf.Type == reflect.TypeFor[*url.URL]() || strings.HasSuffix(f.Name, "_URL") || strings.Contains(f.Name, "PASSWORD")) && !f.secret {
			t.Errorf("%s may hold a password but is not tagged secret:\"true\"", f.Name)
		}
	}
}

// TestEffectiveInvalid: an invalid configuration gives LoadFrom's error,
// and no settings.
func TestEffectiveInvalid(t *testing.T) {
	t.Parallel()
	environ := map[string]string{"ROBOTSGATE_MODE": "enforcing", "ROBOTSGATE_REDIS_URL": "redis://u:Hunter2secret@127.0.0.1:99999"}
	_, loadErr := LoadFrom(maps.Clone(environ))
	cfg, settings, err := Effective(environ, "v1.2.3")
	if err == nil || cfg != nil || settings != nil {
		t.Fatalf("Effective(invalid) = %v, %v, %v", cfg, settings, err)
	}
	if loadErr == nil || err.Error() != loadErr.Error() {
		t.Errorf("Effective says\n%v\nLoadFrom says\n%v", err, loadErr)
	}
	if strings.Contains(err.Error(), "Hunter2secret") {
		t.Errorf("the error shows the password: %v", err)
	}
}
