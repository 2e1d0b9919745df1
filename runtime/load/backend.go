package load

import (
	"fmt"
	"math"
	"os"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/backend/cpu"
	"github.com/strata-llm/strata/runtime/backend/metal"
	"github.com/strata-llm/strata/runtime/backend/mslemu"
)

// Backends Options.Backend names.
const (
	BackendCPU    = "cpu"    // the pure-Go kernels (runtime/backend/cpu)
	BackendMSLEmu = "mslemu" // the generated MSL, run on the CPU (runtime/backend/mslemu)
	BackendMetal  = "metal"  // the generated MSL on the GPU (runtime/backend/metal; darwin/arm64)
	// BackendMetalEmu is the Metal backend, every Objective-C call made to a
	// recording device whose "GPU" runs each encoded dispatch with the MSL
	// emulator: the backend's encoding, bindings, constants, ICB replay and
	// host points, checked end to end on any platform.
	BackendMetalEmu = "metal-emu"
)

// Backends lists the backend names, default first.
var Backends = []string{BackendCPU, BackendMSLEmu, BackendMetal, BackendMetalEmu, BackendCUDA}

// backend is the engine backend opt asks for, running artifact a: cpu takes
// only its graphs (at load), its kernels on threads goroutines; the others
// take its kernels.metal and metadata.
func (opt Options) backend(a *artifact.Artifact, threads int) (backend.Backend, error) {
	switch opt.Backend {
	case "", BackendCPU:
		return cpu.New(threads), nil
	case BackendMSLEmu:
		return mslemu.New(a, opt.MSLEmu)
	case BackendMetal, BackendMetalEmu:
		k, err := metal.KernelsFrom(a)
		if err != nil {
			return nil, err
		}
		var b *metal.Backend
		if opt.Backend == BackendMetal {
			b, err = metal.Open(k, opt.Metal)
		} else {
			var rec *metal.Recorder
			if rec, err = EmulatedMetal(a, opt.MSLEmu); err == nil {
				b, err = metal.New(rec, k, opt.Metal)
			}
		}
		if err != nil {
			return nil, err
		}
		return b.Engine(), nil
	case BackendCUDA:
		return cudaBackend(a, opt.CUDA)
	}
	return nil, fmt.Errorf("unknown backend %q (want one of %v)", opt.Backend, Backends)
}

// EmulatedMetal is a recording Metal device whose GPU runs each dispatch
// it reaches with the MSL emulator, under the constants, bindings and grid
// the Metal backend encoded (BackendMetalEmu's device; exported for the
// metal backend's tests, which mutate what it executes). Its library
// declares each function's constants as Metal's reflection would, so the
// backend's load-time check runs too.
func EmulatedMetal(m *artifact.Artifact, opt mslemu.Options) (*metal.Recorder, error) {
	if opt.Sanitize != mslemu.NoSanitizer {
		return nil, fmt.Errorf("backend %s runs the kernels in process: no sanitizer (use --backend mslemu)", BackendMetalEmu)
	}
	emu, err := mslemu.New(m, opt)
	if err != nil {
		return nil, err
	}
	rec := metal.NewRecorder()
	rec.HostLimit = math.MaxInt64
	info := rec.Info()
	info.PageSize = int64(os.Getpagesize()) // the emulator's pages are the host's
	rec.SetInfo(info)
	rec.Declared = metal.DeclaredFrom(m)
	rec.Execute = func(l metal.Launch) error {
		consts := make(map[int]int64, len(l.Function.Constants))
		for _, c := range l.Function.Constants {
			consts[c.Index] = c.Value
		}
		return emu.Launch(mslemu.Launch{Kernel: l.Function.Name, Constants: consts, Slots: l.Slots, Grid: l.Grid, Threadgroup: l.Threadgroup})
	}
	return rec, nil
}
