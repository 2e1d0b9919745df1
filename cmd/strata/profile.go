package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
)

// cpuProfileFlag adds --cpuprofile to fs; start begins the profile when the
// flag is set and returns the function that ends it and writes the file.
func cpuProfileFlag(fs *flag.FlagSet) (start func() (stop func() error, err error)) {
	path := fs.String("cpuprofile", "", "write a CPU profile of the measured runs to `file` (go tool pprof reads it)")
	return func() (func() error, error) {
		if *path == "" {
			return func() error { return nil }, nil
		}
		f, err := os.Create(*path)
		if err != nil {
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("--cpuprofile %s: %w", *path, err)
		}
		return func() error {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				return fmt.Errorf("--cpuprofile %s: %w", *path, err)
			}
			return nil
		}, nil
	}
}
