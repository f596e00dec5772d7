package config

import (
	"fmt"
	"log/slog"
	"net/url"
	"reflect"
	"strings"
	"time"

	"robotsgate/robots/fetch"
)

// Source says where the value in force of a setting came from.
type Source string

const (
	// SourceEnvironment: the variable is set (to a non-empty value).
	SourceEnvironment Source = "environment"
	// SourceDefault: the variable is unset and its default applies.
	SourceDefault Source = "default"
	// SourceDerived: the variable is unset and its value was worked out
	// from the variable [Setting.From] names.
	SourceDerived Source = "derived"
	// SourceMachine: the variable is unset and its value comes from the
	// machine, as [Setting.From] says.
	SourceMachine Source = "machine"
)

// userConfigDir is what of the machine ROBOTSGATE_CA_DIR's default comes
// from.
const userConfigDir = "the user's config directory"

// masked stands for a secret in a [Setting]'s value.
const masked = "****"

// Setting is one variable's value in force: what the proxy would use.
type Setting struct {
	// Name is the variable, e.g. "ROBOTSGATE_LISTEN".
	Name string `json:"name"`
	// Value is written as configuration accepts it ("" for none), a
	// secret masked (see [Effective]).
	Value string `json:"value"`
	// Source says where Value came from.
	Source Source `json:"source"`
	// From names the variable a derived value was worked out from, or
	// what of the machine it was taken from; empty for other sources.
	From string `json:"from,omitempty"`
}

// SourceText says where the value came from in words: "environment",
// "default", "derived from ROBOTSGATE_X" or "from the machine (…)".
func (s Setting) SourceText() string {
	switch s.Source {
	case SourceDerived:
		return "derived from " + s.From
	case SourceMachine:
		return "from the machine (" + s.From + ")"
	}
	return string(s.Source)
}

// Effective reads the configuration from environ as [LoadFrom] does and
// returns it with every variable's value in force, in [Config]'s order,
// and where each came from. version completes the default User-Agent of
// robots.txt fetches, as in [Config.FetchOptions].
//
// The values of variables tagged secret are masked: in a URL the password
// of its user information (and a user given without a password, which
// some clients take for one) is shown as "****", any other value whole.
func Effective(environ map[string]string, version string) (*Config, []Setting, error) {
	cfg, c, err := loadChecked(environ, true)
	if err != nil {
		return nil, nil, err
	}
	values := reflect.ValueOf(cfg).Elem()
	settings := make([]Setting, len(c.fields))
	for i, f := range c.fields {
		s := Setting{Name: f.Name, Value: formatValue(values.Field(i).Interface()), Source: SourceDefault}
		if _, set := c.given(f.Name); set {
			s.Source = SourceEnvironment
		} else if o := c.origins[i]; o.source != "" {
			s.Source, s.From = o.source, o.from
		}
		if f.goName == "FetchUserAgent" && s.Value == "" {
			s.Value = fetch.DefaultUserAgent(version)
		}
		if f.secret {
			s.Value = maskSecret(s.Value)
		}
		settings[i] = s
	}
	return cfg, settings, nil
}

// formatValue writes a field's value as configuration accepts it.
func formatValue(v any) string {
	switch v := v.(type) {
	case time.Duration:
		return formatDuration(v)
	case slog.Level:
		return strings.ToLower(v.String())
	case *url.URL:
		if v == nil {
			return ""
		}
		return v.String()
	case fmt.Stringer:
		return v.String()
	}
	return fmt.Sprint(v)
}

// formatDuration drops the zero minutes and seconds time.Duration.String
// writes: "24h", "1m", "1m30s", "200ms".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// maskSecret hides the secret in a value: a URL's password, or its user
// when it has no password, and any other value whole.
func maskSecret(v string) string {
	scheme, rest, isURL := strings.Cut(v, "://")
	switch {
	case v == "":
		return ""
	case !isURL:
		return masked
	}
	// As the fleet's URL check reads it: whatever comes before the last
	// '@' is the user information, even with a '@' not percent-encoded.
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return v
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return scheme + "://" + masked + rest[at:]
	}
	return scheme + "://" + user + ":" + masked + rest[at:]
}
