package mslemu_test

import (
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/backend/cpu"
)

// The suites hold backends to the cpu backend's logits within bounds
// tighter than q8 activation rounding (quantized plans: e2e.QuantLogitsTol),
// so the cpu backend runs its float32-activation path here. The integer-dot
// path is held to its own bound in models/quant and runtime/backend/cpu,
// and its end-to-end cost is measured in docs/cpu.md.
func init() { cpu.SetIntegerDots(false) }

// TestMain removes the oracles e2e converted to GGUF for the run.
func TestMain(m *testing.M) { e2e.Main(m) }
