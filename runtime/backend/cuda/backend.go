// Package cuda is the backend that runs the generated MSL on an NVIDIA GPU:
// a model's kernels.metal, compiled by NVRTC as CUDA C++ through a prelude
// (prelude/metal_stdlib) that gives Metal's names CUDA meanings
// (an Apple simdgroup and an NVIDIA warp are both 32 lanes), one program
// per pipeline with its function constants as compile-time values and a
// __global__ wrapper written from the artifact's metadata, as runtime/backend/mslemu
// writes its harness. libcuda and libnvrtc are loaded with purego: no cgo.
//
// It runs the window graphs with their own concurrency: the dispatches of
// one barrier group are launched on several streams, joined by events at
// the graph's barriers (or, replayed, captured into CUDA graphs whose edges
// are exactly those joins, as an ICB replays a window); host points are
// served as the Metal backend serves them: the GPU signals a host word after
// the router, the host serves the routed experts while the GPU runs on to
// the point that needs them and waits there on a second word.
package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// ThreadgroupMemoryLimit is what an Apple GPU gives one threadgroup; a
// pipeline whose static shared memory exceeds it is refused, although the
// H200 would give more.
const ThreadgroupMemoryLimit = 32 << 10

// Schedule is how a window's dispatches are put on streams.
type Schedule int

const (
	// Concurrent launches each barrier group's dispatches on several
	// streams, joined at the graph's barriers.
	Concurrent Schedule = iota
	// Serial launches every dispatch on one stream in graph order: a
	// barrier after every dispatch (the naive graph).
	Serial
	// Reversed launches each barrier group on one stream in reverse
	// order: an order the graph allows, and the one that exposes a
	// missing barrier between two dispatches of a group.
	Reversed
)

func (s Schedule) String() string {
	switch s {
	case Concurrent:
		return "concurrent"
	case Serial:
		return "serial"
	case Reversed:
		return "reversed"
	}
	return fmt.Sprintf("schedule(%d)", int(s))
}

// Options tune the backend.
type Options struct {
	// Streams is how many streams a barrier group's dispatches spread over
	// (0: 4).
	Streams int
	// Schedule of the dispatches (Concurrent by default).
	Schedule Schedule
	// Direct launches every dispatch of every window. By default each
	// window is recorded into CUDA graphs once (one per stretch between
	// host points) and replayed: the same launches in the same order and
	// streams, so the results are the same bits, for less launch overhead.
	Direct bool
	// Pinned puts every buffer in page-locked host memory the GPU reads
	// over the bus, instead of managed memory (the default where the GPU
	// supports concurrent managed access).
	Pinned bool
	// HostTimeout bounds how long the host waits for the GPU at a host
	// point (0: one minute).
	HostTimeout time.Duration
	// PipelineCache is the folder compiled pipelines are kept in between
	// starts ("": strata/cuda-pipelines in the user cache folder;
	// PipelineCacheOff compiles every pipeline at every start).
	PipelineCache string
}

// DeviceInfo describes the GPU.
type DeviceInfo struct {
	Name                   string
	Major, Minor           int
	Multiprocessors        int
	SharedPerBlock         int
	L2Bytes                int
	Driver                 int
	NVRTCMajor, NVRTCMinor int
	ConcurrentManaged      bool
}

func (i DeviceInfo) String() string {
	return fmt.Sprintf("%s (sm_%d%d, %d SMs, L2 %d MiB), driver %d.%d, NVRTC %d.%d", i.Name, i.Major, i.Minor,
		i.Multiprocessors, i.L2Bytes>>20, i.Driver/1000, i.Driver%1000/10, i.NVRTCMajor, i.NVRTCMinor)
}

// Backend runs window graphs of one generated model on GPU 0.
type Backend struct {
	d       *driver
	nv      *nvrtc
	ctx     uintptr
	dev     int32
	model   *artifact.Artifact
	opt     Options
	info    DeviceInfo
	headers map[string][]byte

	mu        sync.Mutex // serializes every driver call (one context, made current per call)
	pipes     map[string]*pipeline
	programs  []*Program
	memories  []*Memory
	closed    bool
	cache     pipelineCache
	Compiled  int           // pipelines built (compiled, or read from the pipeline cache)
	Cached    int           // of those, read from the pipeline cache
	CompileIn time.Duration // wall time spent building them (NVRTC, or reading the cache)
}

// pipeline is one compiled kernel specialization.
type pipeline struct {
	key        string
	mod, fn    uintptr
	shared     int
	regs       int
	local      int
	maxThreads int
}

var _ backend.Backend = (*Backend)(nil)

// Available says whether this machine can run the backend (a CUDA driver
// with at least one GPU, and NVRTC), and if not why.
func Available() error {
	d, err := loadDriver()
	if err != nil {
		return err
	}
	var n int32
	if err := d.check("cuDeviceGetCount", d.deviceGetCount(&n)); err != nil {
		return err
	}
	if n == 0 {
		return errors.New("cuda: the driver sees no GPU")
	}
	_, err = loadNVRTC()
	return err
}

// New opens GPU 0 for model m. A model whose graphs dispatch kernels
// kernels.metal lacks is refused.
func New(m *artifact.Artifact, opt Options) (*Backend, error) {
	if err := m.Check(); err != nil { // the metadata its kernel wrappers are written from
		return nil, fmt.Errorf("cuda: %w", err)
	}
	if len(m.Missing) > 0 {
		return nil, fmt.Errorf("cuda: model %s: kernels.metal lacks kernels its graphs dispatch: %v", m.Name, m.Missing)
	}
	if err := Available(); err != nil {
		return nil, err
	}
	if opt.Streams <= 0 {
		opt.Streams = 4
	}
	if opt.HostTimeout <= 0 {
		opt.HostTimeout = time.Minute
	}
	d, _ := loadDriver()
	nv, _ := loadNVRTC()
	b := &Backend{d: d, nv: nv, model: m, opt: opt, pipes: map[string]*pipeline{}, cache: openPipelineCache(opt.PipelineCache)}
	src, err := m.Source()
	if err != nil {
		return nil, err
	}
	prelude, err := Prelude()
	if err != nil {
		return nil, err
	}
	b.headers = map[string][]byte{"kernels.metal": SharedDeclarations(src), "metal_stdlib": prelude}
	if err := d.check("cuDeviceGet", d.deviceGet(&b.dev, 0)); err != nil {
		return nil, err
	}
	if err := d.check("cuDevicePrimaryCtxRetain", d.primaryCtxRetain(&b.ctx, b.dev)); err != nil {
		return nil, err
	}
	err = b.do(func() error {
		attr := func(a int32) int {
			var v int32
			d.deviceGetAttribute(&v, a, b.dev)
			return int(v)
		}
		name := make([]byte, 256)
		d.deviceGetName(&name[0], int32(len(name)), b.dev)
		var drv int32
		d.driverVersion(&drv)
		b.info = DeviceInfo{Name: goString(&name[0]), Major: attr(attrComputeMajor), Minor: attr(attrComputeMinor),
			Multiprocessors: attr(attrMultiprocessors), SharedPerBlock: attr(attrMaxSharedPerBlock), L2Bytes: attr(attrL2Size),
			Driver: int(drv), ConcurrentManaged: attr(attrConcurrentManagedAccess) == 1}
		b.info.NVRTCMajor, b.info.NVRTCMinor = nv.Version()
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !b.info.ConcurrentManaged {
		b.opt.Pinned = true // the host could not touch managed memory while a window runs
	}
	return b, nil
}

// Info describes the GPU.
func (b *Backend) Info() DeviceInfo { return b.info }

// Model is the generated model the backend runs.
func (b *Backend) Model() *artifact.Artifact { return b.model }

// Programs are the programs compiled so far, in order.
func (b *Backend) Programs() []*Program {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*Program(nil), b.programs...)
}

// do runs f with the backend's context current on a locked OS thread.
func (b *Backend) do(f func() error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errors.New("cuda: backend is closed")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := b.d.check("cuCtxSetCurrent", b.d.ctxSetCurrent(b.ctx)); err != nil {
		return err
	}
	return f()
}

// pipelineKey names a kernel specialization and its launch bound.
func pipelineKey(p artifact.Pipeline, k *artifact.Kernel, maxThreads int) string {
	return fmt.Sprintf("%s/%d", pipelineOf(p, k).Key(), maxThreads)
}

// pipelineOf keeps the constants the kernel reads (Metal ignores the rest;
// so does this backend, so pipelines that differ only there are one).
func pipelineOf(p artifact.Pipeline, k *artifact.Kernel) artifact.Pipeline {
	out := artifact.Pipeline{Kernel: p.Kernel}
	for _, v := range p.Values {
		for _, idx := range k.Constants {
			if idx == v.Index {
				out.Values = append(out.Values, v)
			}
		}
	}
	return out
}

// cubin is pipeline s's CUBIN: from the pipeline cache, or compiled by
// NVRTC and stored there. It also returns the cache key and whether the
// binary came from the cache.
func (b *Backend) cubin(s pipeSpec, opts []string) (bin []byte, key string, cached bool, err error) {
	unit, err := pipelineSource(b.model, s.kernel, s.values, s.maxThreads)
	if err != nil {
		return nil, "", false, fmt.Errorf("cuda: pipeline %s: %w", s.key, err)
	}
	key = cubinKey(unit, b.headers, opts, b.info.NVRTCMajor, b.info.NVRTCMinor)
	if bin, ok := b.cache.get(key); ok {
		return bin, key, true, nil
	}
	bin, _, err = b.nv.Compile(unit, s.kernel.Name+".cu", b.headers, opts)
	if err != nil {
		return nil, key, false, fmt.Errorf("cuda: pipeline %s: %w", s.key, err)
	}
	_ = b.cache.put(key, bin) // best effort: an unwritable cache costs the next start a compile
	return bin, key, false, nil
}

// build compiles (NVRTC, in parallel; or reads from the pipeline cache) and
// loads every pipeline in want not built yet.
func (b *Backend) build(want map[string]pipeSpec) error {
	b.mu.Lock()
	var todo []pipeSpec
	for key, s := range want {
		if _, ok := b.pipes[key]; !ok {
			s.key = key
			todo = append(todo, s)
		}
	}
	b.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	start := time.Now()
	bins := make([][]byte, len(todo))
	keys := make([]string, len(todo))
	cached := make([]bool, len(todo))
	errs := make([]error, len(todo))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	opts := compileOptions(b.info.Major, b.info.Minor)
	for i, s := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			bins[i], keys[i], cached[i], errs[i] = b.cubin(s, opts)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, c := range cached {
		if c {
			b.Cached++
		}
	}
	b.CompileIn += time.Since(start)
	return b.do(func() error {
		d := b.d
		for i, s := range todo {
			p := &pipeline{key: s.key}
			err := d.check("cuModuleLoadData", d.moduleLoadData(&p.mod, &bins[i][0]))
			if err != nil && cached[i] { // a cached binary the driver refuses: build it afresh
				b.cache.drop(keys[i])
				b.Cached--
				var cerr error
				if bins[i], _, _, cerr = b.cubin(s, opts); cerr != nil {
					return cerr
				}
				err = d.check("cuModuleLoadData", d.moduleLoadData(&p.mod, &bins[i][0]))
			}
			if err != nil {
				return fmt.Errorf("pipeline %s: %w", s.key, err)
			}
			if err := d.check("cuModuleGetFunction", d.moduleGetFunction(&p.fn, p.mod, cstr(entryName))); err != nil {
				return fmt.Errorf("pipeline %s: %w", s.key, err)
			}
			get := func(a int32) int {
				var v int32
				d.funcGetAttribute(&v, a, p.fn)
				return int(v)
			}
			p.shared, p.regs, p.local, p.maxThreads = get(funcSharedBytes), get(funcNumRegs), get(funcLocalBytes), get(funcMaxThreads)
			if p.shared > ThreadgroupMemoryLimit {
				d.moduleUnload(p.mod)
				return fmt.Errorf("cuda: pipeline %s needs %d bytes of threadgroup memory, more than the %d an Apple GPU gives", s.key, p.shared, ThreadgroupMemoryLimit)
			}
			if p.maxThreads < s.maxThreads {
				d.moduleUnload(p.mod)
				return fmt.Errorf("cuda: pipeline %s runs at most %d threads per block, its dispatches use %d", s.key, p.maxThreads, s.maxThreads)
			}
			b.pipes[s.key] = p
			b.Compiled++
		}
		return nil
	})
}

type pipeSpec struct {
	key        string
	kernel     *artifact.Kernel
	values     map[int]int64
	maxThreads int
}

// NewMemory allocates the buffers the graphs declare (as the cpu backend
// sizes them), zeroed.
func (b *Backend) NewMemory(graphs ...*graph.Graph) (backend.Memory, error) {
	m, err := b.newMemory(graphs...)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Close releases every program, memory and module.
func (b *Backend) Close() error {
	b.mu.Lock()
	progs, mems := b.programs, b.memories
	b.programs, b.memories = nil, nil
	b.mu.Unlock()
	var errs []error
	for _, p := range progs {
		errs = append(errs, p.release())
	}
	for _, m := range mems {
		errs = append(errs, m.release())
	}
	errs = append(errs, b.do(func() error {
		for _, p := range b.pipes {
			b.d.moduleUnload(p.mod)
		}
		b.pipes = map[string]*pipeline{}
		return nil
	}))
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return errors.Join(errs...)
}
