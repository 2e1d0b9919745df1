package main

import (
	"flag"
	"fmt"
	"runtime/pprof"

	"github.com/strata-llm/strata/internal/outfile"
)

// cpuProfileFlag adds --cpuprofile to fs; start begins the profile when the
// flag is set and returns the function that ends it and writes the file.
func cpuProfileFlag(fs *flag.FlagSet) (start func() (stop func() error, err error)) {
	path := fs.String("cpuprofile", "", "write a CPU profile of the measured runs to `file` (go tool pprof reads it)")
	return func() (func() error, error) {
		if *path == "" {
			return func() error { return nil }, nil
		}
		// Written beside the target and renamed into place once complete.
		f, err := outfile.Create(*path)
		if err != nil {
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Abort()
			return nil, fmt.Errorf("--cpuprofile %s: %w", *path, err)
		}
		return func() error {
			pprof.StopCPUProfile()
			if err := f.Commit(); err != nil {
				return fmt.Errorf("--cpuprofile: %w", err)
			}
			return nil
		}, nil
	}
}
