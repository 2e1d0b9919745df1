package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// version, when set at link time (go build -ldflags "-X main.version=v1.2"),
// names the build where the module version and VCS stamp say nothing (a
// tarball, a build with -buildvcs=false).
var version string

// printVersion writes what strata --version says.
func printVersion(w io.Writer) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	fmt.Fprintln(w, versionLine(bi, version, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH))
}

// versionLine is the module version (go build derives one from the VCS
// tag or commit), the VCS revision and commit time the build recorded, and
// the Go version; without a recorded revision it says how to get one.
func versionLine(bi *debug.BuildInfo, linked, goVersion, platform string) string {
	v, path := "(devel)", "github.com/strata-llm/strata"
	var revision, at string
	modified := false
	if bi != nil {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		if bi.Main.Path != "" {
			path = bi.Main.Path
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if linked != "" {
		v = linked
	}
	var about []string
	switch {
	case revision != "":
		r := "revision " + revision
		if at != "" {
			r += ", committed " + at
		}
		if modified {
			r += ", with uncommitted changes"
		}
		about = append(about, r)
	case linked == "":
		about = append(about, "no VCS revision recorded: go run, -buildvcs=false or a git worktree leave it out; "+
			"go build ./cmd/strata in a git clone records it")
	}
	return fmt.Sprintf("strata %s (%s), %s %s", v, strings.Join(append([]string{path}, about...), "; "), goVersion, platform)
}
