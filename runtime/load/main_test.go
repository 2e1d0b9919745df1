package load_test

import (
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
)

// TestMain removes the oracles e2e converted to GGUF for the run.
func TestMain(m *testing.M) { e2e.Main(m) }
