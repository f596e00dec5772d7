package proxy

import "testing"

func TestModeUnmarshalText(t *testing.T) {
	for _, tt := range []struct {
		text string
		want Mode
		ok   bool
	}{
		{"AuDiT", ModeAudit, true},
		{"enforce", ModeEnforce, true},
		{"", "", false},
		{"warn", "", false},
	} {
		var m Mode
		err := m.UnmarshalText([]byte(tt.text))
		if (err == nil) != tt.ok || m != tt.want {
			t.Errorf("Mode.UnmarshalText(%q) = %q, %v; want %q, ok %v", tt.text, m, err, tt.want, tt.ok)
		}
	}
}

func TestAuditOnErrorUnmarshalText(t *testing.T) {
	for _, tt := range []struct {
		text string
		want AuditOnError
		ok   bool
	}{
		{"Continue", AuditContinue, true},
		{"refuse", AuditRefuse, true},
		{"", "", false},
		{"ignore", "", false},
	} {
		var a AuditOnError
		err := a.UnmarshalText([]byte(tt.text))
		if (err == nil) != tt.ok || a != tt.want {
			t.Errorf("AuditOnError.UnmarshalText(%q) = %q, %v; want %q, ok %v", tt.text, a, err, tt.want, tt.ok)
		}
	}
}
