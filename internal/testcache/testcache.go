// Package testcache names the folders where the tests keep what they
// compute once and reuse from run to run: generated artifacts
// (internal/gentest), converted oracles (internal/e2e) and the mutation
// controls' faulty assembly (internal/asmcheck).
package testcache

import (
	"os"
	"path/filepath"
)

// Root is the cache root of one kind: the folder the environment variable
// env names, or os.UserCacheDir()/strata/name when it is unset; "" (and no
// error) when it is "off".
func Root(env, name string) (string, error) {
	base := os.Getenv(env)
	switch base {
	case "off":
		return "", nil
	case "":
		d, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(d, "strata", name), nil
	}
	return base, nil
}
