package robots

// UsageLine is a Content-Usage or Content-Signal line of a group: what a
// site says its content may be used for. Package robots reads where a line
// applies (its group, its path); package robots/usage reads what it says.
type UsageLine struct {
	Directive Directive // DirectiveContentUsage or DirectiveContentSignal
	Line      int
	// Path is the path pattern a Content-Usage line is scoped to, as
	// written; "" when it names none (it speaks for every path), and for
	// Content-Signal.
	Path string
	// Value is the preference expression as written, after any path:
	// "train-ai=n, search=y", "search=yes, ai-train=no".
	Value string
}

// HasUsage reports whether any group of the file has a usage line: without
// one, [Robots.Usage] has nothing to say and need not be asked.
func (r *Robots) HasUsage() bool {
	return false // TODO(helper robots-usage)
}

// Usage returns the usage lines that apply to token at pathAndQuery, in
// file order: those of the groups [Robots.Check] selects for token; of
// their Content-Usage lines, the one whose path matches longest (a line
// without a path matches every path), for the path as sent and for every
// reading of it (see [Step]), so that no spelling of a path escapes a
// preference; every Content-Signal line. nil when none applies.
func (r *Robots) Usage(token, pathAndQuery string) []UsageLine {
	return nil // TODO(helper robots-usage)
}

// Usage is [Robots.Usage] when the outcome is OK, nil otherwise.
func (a *Answer) Usage(token, pathAndQuery string) []UsageLine {
	if a == nil || a.Outcome != OutcomeOK {
		return nil
	}
	return a.Robots.Usage(token, pathAndQuery)
}
