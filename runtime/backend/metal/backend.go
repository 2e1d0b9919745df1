package metal

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/strata-llm/strata/graph"
)

// Options tune the backend.
type Options struct {
	// ICB records each window shape once into an indirect command buffer
	// and replays it every window (the commands the plan marks replayable;
	// the rest are encoded directly).
	ICB bool
	// KeepAlive keeps the GPU clocked up for this long after each window by
	// committing a tiny command buffer every millisecond while idle, so the
	// next window does not start on a GPU that has clocked down. 0: off.
	KeepAlive time.Duration
	// Residency is called at every host point; nil: NoResidency.
	Residency Residency
	// HostTimeout bounds how long a window may take before the host gives
	// up on it (a GPU fault that never signals). 0: one minute.
	HostTimeout time.Duration
	// Limits are the guards every dispatch is checked against at load; zero:
	// graph.DefaultLimits.
	Limits graph.Limits
}

// Backend runs window graphs on one Metal device. Every Objective-C call
// happens on one goroutine locked to its OS thread: autorelease pools must
// be drained on the thread that filled them, and that thread is also the one
// that spins on the host points (one spinning thread, never a passive wait).
type Backend struct {
	dev     Device
	info    DeviceInfo
	opt     Options
	kernels Kernels
	lib     Library
	libInfo LibraryInfo
	event   Event
	value   uint64 // the shared event's value after the last window

	pipelines map[string]pipelineEntry
	declared  map[string][]DeclaredConstant // by function name; nil entry: unknown

	work      chan func()
	done      chan struct{}
	life      sync.RWMutex // held for reading by every call into the thread
	closed    bool         // guarded by life
	closeOnce sync.Once

	mu       sync.Mutex // guards memories, programs, stats, lastEnd
	broken   error      // a window that never finished (backend thread only)
	memories []*Memory
	programs []*Program
	stats    Stats
	lastEnd  time.Time // when the last window returned, for HostBefore

	keep keepAlive
}

type pipelineEntry struct {
	p    Pipeline
	info PipelineInfo
}

// New starts a backend on dev: it compiles the kernels' library (explicit
// MSL version, safe math, both read back) and creates the shared event the
// host points use.
func New(dev Device, k Kernels, opt Options) (*Backend, error) {
	if k.Source == "" {
		return nil, errors.New("metal: the kernels have no MSL source")
	}
	if k.Resolve == nil {
		return nil, errors.New("metal: the kernels have no resolver from dispatches to functions")
	}
	if k.LanguageVersion == (LanguageVersion{}) {
		k.LanguageVersion = DefaultLanguageVersion
	}
	if k.Args == nil {
		k.Args = ScalarArgs
	}
	if opt.Residency == nil {
		opt.Residency = NoResidency{}
	}
	if opt.HostTimeout <= 0 {
		opt.HostTimeout = time.Minute
	}
	if opt.Limits == (graph.Limits{}) {
		opt.Limits = graph.DefaultLimits
	}
	b := &Backend{
		dev: dev, opt: opt, kernels: k,
		pipelines: map[string]pipelineEntry{},
		declared:  map[string][]DeclaredConstant{},
		work:      make(chan func()),
		done:      make(chan struct{}),
	}
	go b.loop()
	err := b.do(func() error {
		b.info = dev.Info()
		lib, li, err := dev.NewLibrary(k.Source, k.LanguageVersion)
		if err != nil {
			return fmt.Errorf("metal: compiling kernels.metal: %w", err)
		}
		b.lib, b.libInfo = lib, li
		if li.LanguageVersion != k.LanguageVersion {
			return fmt.Errorf("metal: asked the compiler for MSL %s, it reports %s", k.LanguageVersion, li.LanguageVersion)
		}
		if !li.SafeMath {
			return errors.New("metal: the library was not compiled with safe math")
		}
		if b.event, err = dev.NewEvent(); err != nil {
			return fmt.Errorf("metal: creating the host-point event: %w", err)
		}
		if opt.KeepAlive > 0 {
			if err := b.keep.init(b); err != nil {
				return fmt.Errorf("metal: keep-alive: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Info describes the device.
func (b *Backend) Info() DeviceInfo { return b.info }

// Library describes the compiled library, as read back.
func (b *Backend) Library() LibraryInfo { return b.libInfo }

// loop runs every device call on one locked OS thread.
func (b *Backend) loop() {
	runtime.LockOSThread() // never unlocked: the thread ends with the backend
	defer close(b.done)
	var ticker *time.Ticker
	var tick <-chan time.Time
	for {
		select {
		case f, ok := <-b.work:
			if !ok {
				if ticker != nil {
					ticker.Stop()
				}
				return
			}
			f()
			if b.keep.wanted() && ticker == nil {
				ticker = time.NewTicker(keepAlivePeriod)
				tick = ticker.C
			}
		case <-tick:
			if !b.keep.tick(b) {
				ticker.Stop()
				ticker, tick = nil, nil
			}
		}
	}
}

// do runs f on the backend's thread and returns its error.
func (b *Backend) do(f func() error) error {
	b.life.RLock()
	defer b.life.RUnlock()
	if b.closed {
		return errors.New("metal: backend is closed")
	}
	errc := make(chan error, 1)
	b.work <- func() { errc <- f() }
	return <-errc
}

func (b *Backend) track(m *Memory) {
	b.mu.Lock()
	b.memories = append(b.memories, m)
	b.mu.Unlock()
}

// pipeline returns the pipeline of f, building it on first use. It runs on
// the backend's thread.
func (b *Backend) pipeline(f Function) (pipelineEntry, error) {
	key := f.Key()
	if e, ok := b.pipelines[key]; ok {
		return e, nil
	}
	decl, seen := b.declared[f.Name]
	if !seen {
		d, known, err := b.dev.FunctionConstants(b.lib, f.Name)
		if err != nil {
			return pipelineEntry{}, fmt.Errorf("function %s: %w", f.Name, err)
		}
		if known && d == nil {
			d = []DeclaredConstant{}
		}
		b.declared[f.Name], decl = d, d
	}
	if decl != nil {
		if err := checkDeclared(f, decl); err != nil {
			return pipelineEntry{}, err
		}
	}
	p, info, err := b.dev.NewPipeline(b.lib, f, b.opt.ICB)
	if err != nil {
		return pipelineEntry{}, fmt.Errorf("pipeline %s: %w", key, err)
	}
	if info.MaxTotalThreadsPerThreadgroup < 1 {
		b.dev.Release(uintptr(p))
		return pipelineEntry{}, fmt.Errorf("pipeline %s reports %d threads per threadgroup", key, info.MaxTotalThreadsPerThreadgroup)
	}
	e := pipelineEntry{p: p, info: info}
	b.pipelines[key] = e
	return e, nil
}

// Pipelines is the number of distinct pipelines built so far.
func (b *Backend) Pipelines() int {
	n := 0
	_ = b.do(func() error { n = len(b.pipelines); return nil })
	return n
}

// Close releases every object and stops the backend's thread. Memory and
// programs of the backend are unusable after it.
func (b *Backend) Close() {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		progs, mems := b.programs, b.memories
		b.mu.Unlock()
		for _, p := range progs {
			p.release()
		}
		for _, m := range mems {
			m.release()
		}
		_ = b.do(func() error {
			b.keep.release(b)
			for _, e := range b.pipelines {
				b.dev.Release(uintptr(e.p))
			}
			b.pipelines = map[string]pipelineEntry{}
			if b.event != 0 {
				b.dev.Release(uintptr(b.event))
			}
			if b.lib != 0 {
				b.dev.Release(uintptr(b.lib))
			}
			b.dev.Close()
			return nil
		})
		b.life.Lock()
		b.closed = true
		close(b.work)
		b.life.Unlock()
		<-b.done
	})
}
