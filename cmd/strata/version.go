package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// printVersion writes the module version and the VCS revision the binary
// was built from (go build records them; "(devel)" for a checkout build).
func printVersion(w io.Writer) {
	version, path, rev := "(unknown)", "strata", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		version, path = bi.Main.Version, bi.Main.Path
		var revision, at, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = ", modified"
				}
			}
		}
		if revision != "" {
			rev = fmt.Sprintf(", revision %s (%s%s)", revision, at, modified)
		}
	}
	fmt.Fprintf(w, "strata %s (%s%s), %s %s/%s\n", version, path, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
