package load

import "github.com/strata-llm/strata/runtime/resolve"

// What the tests (package load_test, which imports internal/e2e and so
// cannot be package load) reach inside the loader.
var (
	GraphsOf     = graphsOf
	ReadMemory   = &readMemory
	ClassFormats = classFormats
)

const DefaultModelName = defaultModelName

func (opt Options) ResolveOptions() resolve.Options { return opt.resolveOptions() }
