package serve

import (
	"github.com/strata-llm/strata/internal/gentest"
	"github.com/strata-llm/strata/runtime/load"
)

// The tests open small models under their own options (a context of 1024,
// checkpoints written per test): no checked-in artifact is for them, so they
// are generated in process.
func withGenerator(opt load.Options) load.Options {
	opt.Generate = gentest.Generate
	return opt
}
