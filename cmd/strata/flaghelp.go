package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// helpRequest is -h/--help: the text goes to stdout and the exit status is 0,
// like "strata --help". It unwraps to flag.ErrHelp.
type helpRequest struct{ text string }

func (h helpRequest) Error() string { return flag.ErrHelp.Error() }
func (h helpRequest) Unwrap() error { return flag.ErrHelp }

// printFlags lists a flag set's flags as users type them: --name for long
// names, -n for one letter, a placeholder for the value (the usage text's
// `quoted` word, else one from the flag's type), then the usage text and
// the default when it is not the zero value.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		name, usage := flag.UnquoteUsage(f)
		switch {
		case valueNames[name] != "":
			name = valueNames[name]
		case strings.Contains(f.Usage, "`"):
			name = strings.ToUpper(strings.ReplaceAll(name, " ", "-"))
		default:
			name = placeholder(f)
		}
		line := "  " + dash + f.Name
		if !isBool(f) {
			line += " " + name
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" && !strings.Contains(usage, "default") {
			def = fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n      %s%s\n", line, strings.ReplaceAll(usage, "\n", "\n      "), def)
	})
}

// valueNames are the placeholders of usage texts whose quoted word is one
// of the flag's values rather than a name for it.
var valueNames = map[string]string{
	"cpu":    "NAME",
	"auto":   "auto|N",
	"thread": "thread|address",
	"long":   "DURATION",
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// placeholder names a value by its type.
func placeholder(f *flag.Flag) string {
	switch f.Value.(flag.Getter).Get().(type) {
	case int, int64, uint, uint64:
		return "N"
	case float64:
		return "X"
	case time.Duration:
		return "DURATION"
	}
	return "VALUE"
}
