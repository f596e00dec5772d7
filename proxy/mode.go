package proxy

import (
	"fmt"
	"log/slog"
	"strings"

	"robotsgate/proxy/audit"
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

// AuditOptions are the audit log's options for a proxy that follows
// policy: a failure and the recovery from it are logged, saying what the
// proxy does meanwhile.
func AuditOptions(policy AuditOnError, log *slog.Logger) audit.Options {
	return audit.Options{
		OnFailure: func(err error) {
			if policy == AuditContinue {
				log.Error("the audit log cannot be written; SERVING ON WITHOUT A WORKING AUDIT LOG (ROBOTSGATE_AUDIT_ON_ERROR=continue): records are kept in memory, within a bound, until it can", "err", err)
				return
			}
			log.Error("the audit log cannot be written; refusing every request with 503 until it can (ROBOTSGATE_AUDIT_ON_ERROR=refuse)", "err", err)
		},
		OnRecovery: func() { log.Info("the audit log can be written again") },
	}
}
