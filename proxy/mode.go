package proxy

import (
	"fmt"
	"strings"
)

// Mode says what a disallowed request gets.
type Mode string

const (
	// ModeEnforce answers 403 and never contacts the origin.
	ModeEnforce Mode = "enforce"
	// ModeAudit records the verdict and forwards the request anyway.
	ModeAudit Mode = "audit"
)

// UnmarshalText accepts "enforce" or "audit" in any case, so that
// configuration can read a Mode directly.
func (m *Mode) UnmarshalText(text []byte) error {
	switch v := Mode(strings.ToLower(string(text))); v {
	case ModeEnforce, ModeAudit:
		*m = v
		return nil
	}
	return fmt.Errorf("%q is not valid; use %q or %q", text, ModeEnforce, ModeAudit)
}

// AuditOnError says what happens while the audit log cannot be written.
type AuditOnError string

const (
	// AuditRefuse answers 503 to every request until the log works again:
	// nothing is fetched that is not recorded.
	AuditRefuse AuditOnError = "refuse"
	// AuditContinue keeps serving, and says so loudly in the log.
	AuditContinue AuditOnError = "continue"
)

// UnmarshalText accepts "refuse" or "continue" in any case.
func (a *AuditOnError) UnmarshalText(text []byte) error {
	switch v := AuditOnError(strings.ToLower(string(text))); v {
	case AuditRefuse, AuditContinue:
		*a = v
		return nil
	}
	return fmt.Errorf("%q is not valid; use %q (answer 503 until the log can be written) or %q", text, AuditRefuse, AuditContinue)
}
