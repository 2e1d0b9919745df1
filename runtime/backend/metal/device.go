package metal

import "time"

// Handles name Metal objects a Device created. They are opaque: an
// Objective-C id on darwin, a counter in a Recorder. Zero is no object.
type (
	Library  uintptr // id<MTLLibrary>
	Pipeline uintptr // id<MTLComputePipelineState>
	Buffer   uintptr // id<MTLBuffer>
	Event    uintptr // id<MTLSharedEvent>
	ICB      uintptr // id<MTLIndirectCommandBuffer>
)

// DeviceInfo is what the backend needs to know about the GPU.
type DeviceInfo struct {
	Name            string
	MaxBufferLength int64 // the largest MTLBuffer the device creates
	PageSize        int64 // buffers wrapped without a copy start and end on pages
	// ICBNeedsTouch: below Apple9 (M1, M2), every pipeline an ICB runs must
	// have been dispatched directly in the encoder first, or the GPU faults
	// with kIOGPUCommandBufferCallbackErrorInvalidResource.
	ICBNeedsTouch bool
}

// LibraryInfo is read back from a compiled library's options, to catch a
// compiler that silently used another MSL version or fast math.
type LibraryInfo struct {
	LanguageVersion LanguageVersion
	SafeMath        bool
}

// PipelineInfo is read back from a compute pipeline.
type PipelineInfo struct {
	MaxTotalThreadsPerThreadgroup int
	ThreadExecutionWidth          int
}

// BufferBinding binds a buffer at an offset to an argument slot.
type BufferBinding struct {
	Buffer Buffer
	Offset int64
	Slot   int
}

// ICBCommand is one compute command recorded into an indirect command
// buffer: a pipeline, every buffer it reads (its argument struct included:
// an ICB has no setBytes), its grid, and its barrier bit.
type ICBCommand struct {
	Pipeline    Pipeline
	Buffers     []BufferBinding
	Grid        [3]int
	Threadgroup [3]int
	Barrier     bool
}

// Commands are the Objective-C calls of one window, in the order the encoder
// makes them. One window is in flight at a time, and every call comes from
// the backend's one OS thread.
type Commands interface {
	// BeginWindow opens an autorelease pool and a command buffer with
	// unretained references (the backend holds every object it uses).
	BeginWindow() error
	// BeginPass opens a concurrent compute encoder; EndPass ends it. Events
	// are encoded between passes.
	BeginPass()
	SetPipeline(p Pipeline)
	SetBuffer(b Buffer, offset int64, slot int)
	SetBytes(data []byte, slot int)
	// Dispatch is dispatchThreadgroups:threadsPerThreadgroup:.
	Dispatch(grid, threadgroup [3]int)
	// MemoryBarrier is memoryBarrierWithScope:MTLBarrierScopeBuffers.
	MemoryBarrier()
	// UseResources makes buffers resident for the commands an ICB runs.
	UseResources(bufs []Buffer)
	// ExecuteICB runs commands [first, first+count) of an ICB.
	ExecuteICB(icb ICB, first, count int)
	EndPass()
	EncodeSignal(e Event, value uint64)
	EncodeWait(e Event, value uint64)
	Commit()
	// SignaledValue and SetSignaledValue are the host side of the shared
	// event; the host spins on the first.
	SignaledValue(e Event) uint64
	SetSignaledValue(e Event, value uint64)
	// Status reports whether the committed command buffer has finished, and
	// its error when it failed.
	Status() (done bool, err error)
	// GPUTime is GPUEndTime - GPUStartTime of the finished command buffer.
	GPUTime() time.Duration
	// EndWindow drops the command buffer and drains the pool.
	EndWindow()
}

// Device is the Objective-C surface of the backend: objects created at load
// time, and the Commands of each window. The darwin implementation calls
// Metal through purego; Recorder records the calls on any platform.
type Device interface {
	Commands
	Info() DeviceInfo
	// NewLibrary compiles MSL source with an explicit language version and
	// safe math, and reads both back.
	NewLibrary(source string, version LanguageVersion) (Library, LibraryInfo, error)
	// FunctionConstants lists the constants a function of lib declares; known
	// is false when the device cannot tell (a recording).
	FunctionConstants(lib Library, name string) (decl []DeclaredConstant, known bool, err error)
	// NewPipeline specializes a function with its constants (set by index)
	// and builds its compute pipeline, able to run from an ICB when forICB.
	NewPipeline(lib Library, f Function, forICB bool) (Pipeline, PipelineInfo, error)
	// NewBuffer creates a shared buffer of size bytes over new page-aligned
	// host memory, wrapped without a copy; it returns the host view (nil
	// when the device keeps no host memory, as a recording of a large buffer).
	NewBuffer(label string, size int64) (Buffer, []byte, error)
	// WrapBuffer wraps page-aligned host memory (a mapped weights file)
	// without a copy; the caller keeps it mapped until the buffer is released.
	WrapBuffer(label string, host []byte) (Buffer, error)
	NewEvent() (Event, error)
	// NewICB creates an indirect command buffer of concurrent dispatches
	// that inherit nothing, for up to commands commands.
	NewICB(commands int) (ICB, error)
	// EncodeICB records command index of icb.
	EncodeICB(icb ICB, index int, c ICBCommand)
	// Release releases an object the device created.
	Release(object uintptr)
	Close()
}
