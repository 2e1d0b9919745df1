// Package mslemu is the backend that runs the generated MSL on the CPU: a
// model's kernels.metal, compiled unmodified by clang (C++ for OpenCL, the
// type check's mode, for the host) against emu/, whose metal_stdlib defines
// what the type check's stand-in (check/metal_stdlib, TypeCheck) only
// declares and whose lane emulator (emu/runtime.cpp) runs every
// threadgroup's threads as fibers with exact 32-lane simdgroups and real
// barriers. A harness written from the model's metadata
// (artifact: kernel names, buffer slots, function-constant indices,
// argument-struct sizes) calls the kernels; the result is a shared library
// loaded with purego (no cgo), cached per machine under a hash of its inputs.
//
// It executes the same window graphs as the cpu backend, dispatch by
// dispatch in graph order, over its own memory, so it reproduces the HF
// oracles if and only if the MSL computes the model.
//
// With Options.Sanitize the kernels are built with ThreadSanitizer (a
// missing barrier is a reported race between the emulated threads) or
// AddressSanitizer (a kernel touching a byte outside the ranges its dispatch
// declares, or outside a threadgroup array, is reported), and run in a child
// process sharing the buffers, since neither sanitizer can be loaded into a
// running Go program.
package mslemu

import (
	"errors"
	"fmt"
	"sync"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// Options configure an Emulator.
type Options struct {
	// Sanitize builds the kernels with a sanitizer (Thread or Address) and
	// runs them in a child process; NoSanitizer loads them in-process.
	Sanitize string
	// Compiler is the clang to build with ("": $STRATA_CLANG, else clang,
	// clang-19 or clang-14 on PATH).
	Compiler string
	// CacheDir keeps built libraries ("": $STRATA_MSLEMU_CACHE, else
	// strata/mslemu in the user's cache directory).
	CacheDir string
}

// Emulator is the mslemu backend of one generated model: it implements
// backend.Backend for graphs of that model.
type Emulator struct {
	model   *artifact.Artifact
	opt     Options
	kernels map[string]int // index in model.Kernels
	built   *built         // the library, or with a sanitizer the executable
	lib     *library       // in-process; nil with a sanitizer
	mu      sync.Mutex
	mems    []*Memory
}

var _ backend.Backend = (*Emulator)(nil)

// New builds (or finds in the cache) the model's kernels with the lane
// emulator. A model whose graphs dispatch kernels kernels.metal lacks is
// refused, as a GPU backend refuses it.
func New(m *artifact.Artifact, opt Options) (*Emulator, error) {
	if len(m.Missing) > 0 {
		return nil, fmt.Errorf("mslemu: model %s: kernels.metal lacks kernels its graphs dispatch: %v", m.Name, m.Missing)
	}
	e := &Emulator{model: m, opt: opt, kernels: map[string]int{}}
	for i, k := range m.Kernels {
		e.kernels[k.Name] = i
	}
	b, err := build(m, opt)
	if err != nil {
		return nil, err
	}
	e.built = b
	if opt.Sanitize != NoSanitizer {
		return e, nil
	}
	if e.lib, err = load(b); err != nil {
		return nil, err
	}
	return e, nil
}

// NewMemory allocates the buffers the graphs declare (as the cpu backend
// does), outside the Go heap so the kernels can hold them; with a sanitizer,
// shared with the child process that runs the kernels.
func (e *Emulator) NewMemory(graphs ...*graph.Graph) (backend.Memory, error) {
	m, err := newMemory(e.opt.Sanitize != NoSanitizer, graphs...)
	if err != nil {
		return nil, err
	}
	if e.lib == nil {
		if m.child, err = startChild(e.built.path, e.opt, m); err != nil {
			m.Close()
			return nil, err
		}
	}
	e.mu.Lock()
	e.mems = append(e.mems, m)
	e.mu.Unlock()
	return m, nil
}

// Close releases every Memory the emulator made (and stops their sanitizer
// processes). The loaded library stays for the process's life.
func (e *Emulator) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for _, m := range e.mems {
		errs = append(errs, m.Close())
	}
	e.mems = nil
	return errors.Join(errs...)
}
