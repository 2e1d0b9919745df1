package e2e

import (
	"errors"
	"math/rand"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/strata-llm/strata/runtime/backend/metal"
	"github.com/strata-llm/strata/runtime/backend/mslemu"
	"github.com/strata-llm/strata/runtime/engine/stream"
	"github.com/strata-llm/strata/runtime/load"
)

// RequireEmulator skips when no clang can build the emulator, unless
// STRATA_REQUIRE_CLANG is set (CI sets it).
func RequireEmulator(t testing.TB) {
	t.Helper()
	if _, err := mslemu.Clang(); errors.Is(err, mslemu.ErrNoClang) {
		if os.Getenv("STRATA_REQUIRE_CLANG") != "" {
			t.Fatal("STRATA_REQUIRE_CLANG is set but " + err.Error())
		}
		t.Skip("skipping mslemu: " + err.Error())
	}
}

// MSLEmuOptions runs the generated MSL on the CPU through the lane
// emulator (skipping without clang).
func MSLEmuOptions(t testing.TB) load.Options {
	RequireEmulator(t)
	return load.Options{Backend: load.BackendMSLEmu, MSLEmu: mslemu.Options{}}
}

// MetalEmuOptions runs the Metal backend (encoder, pipelines per constant
// tuple, bindings, argument structs, ICB replay, host points) on a recording
// device whose GPU is the MSL emulator.
func MetalEmuOptions(t testing.TB, icb bool) load.Options {
	RequireEmulator(t)
	return load.Options{Backend: load.BackendMetalEmu, Metal: metal.Options{ICB: icb}}
}

// Delayed delays every read by a pseudo-random 0–MaxDelay.
type Delayed struct {
	Inner    stream.Reader
	mu       sync.Mutex
	Rng      *rand.Rand
	MaxDelay time.Duration
}

// ReadExpert reads through Inner after the delay.
func (d *Delayed) ReadExpert(layer, expert, off int, dst []byte) error {
	d.mu.Lock()
	wait := time.Duration(d.Rng.Int63n(int64(d.MaxDelay) + 1))
	d.mu.Unlock()
	time.Sleep(wait)
	return d.Inner.ReadExpert(layer, expert, off, dst)
}
