package load_test

import "github.com/strata-llm/strata/runtime/backend/cpu"

// The oracles hold the cpu backend to references computed with float32 (or
// wider) activations, within bounds tighter than q8 activation rounding
// (quantized plans: 2e-3 of the same weights decoded to f32; mslemu: 5e-5 of
// the cpu backend), so this package's tests run the float32-activation path.
// The integer-dot path is held to its own bound in models/quant and
// runtime/backend/cpu, and its end-to-end cost is measured in docs/cpu.md.
func init() { cpu.SetIntegerDots(false) }
