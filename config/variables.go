package config

import (
	"reflect"
	"strings"
)

// Variable describes one robotsgate environment variable.
type Variable struct {
	// Name is the full variable name, e.g. "ROBOTSGATE_LISTEN".
	Name string
	// Default is the value used when the variable is unset or empty, as
	// written in configuration ("" when there is none). Where the default
	// depends on other settings it describes it instead, starting
	// "derived: ", and for ROBOTSGATE_CA_DIR, whose default depends on the
	// user, it describes that.
	Default string
	// Description says in one line what the variable does and accepts.
	Description string
}

// Variables lists every robotsgate variable in the order of [Config]'s
// fields, read from its struct tags.
func Variables() []Variable {
	fs := fields()
	vars := make([]Variable, len(fs))
	for i, f := range fs {
		vars[i] = f.Variable
	}
	return vars
}

// field ties a variable to the Config field it sets.
type field struct {
	Variable
	goName     string
	envDefault string // the envDefault tag, unlike Variable.Default never a description
	secret     bool   // the secret tag: Effective masks the value
}

// fields reads Config's tags; it is rebuilt on each call because it is cheap
// and only used at start-up, which keeps the package free of mutable state.
func fields() []field {
	t := reflect.TypeFor[Config]()
	fs := make([]field, 0, t.NumField())
	for sf := range t.Fields() {
		key, _, _ := strings.Cut(sf.Tag.Get("env"), ",")
		envDefault := sf.Tag.Get("envDefault")
		def, ok := sf.Tag.Lookup("defaultDoc")
		if !ok {
			def = envDefault
		}
		fs = append(fs, field{
			Variable:   Variable{Name: envPrefix + key, Default: def, Description: sf.Tag.Get("desc")},
			goName:     sf.Name,
			envDefault: envDefault,
			secret:     sf.Tag.Get("secret") == "true",
		})
	}
	return fs
}
