package load_test

import (
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/load"
)

// TestMain removes the oracles e2e converted to GGUF for the run and the
// stratagen the generation tests built.
func TestMain(m *testing.M) { e2e.Main(m, load.RemoveStratagen) }
