//go:build darwin && arm64

package metal

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// Metal enum values the device uses.
const (
	mtlDispatchConcurrent     = 1      // MTLDispatchTypeConcurrent
	mtlBarrierScopeBuffers    = 1      // MTLBarrierScopeBuffers
	mtlMathModeSafe           = 0      // MTLMathModeSafe
	mtlResourceShared         = 0      // MTLResourceStorageModeShared, default cache and hazard tracking
	mtlUsageReadWrite         = 1 | 2  // MTLResourceUsageRead | MTLResourceUsageWrite
	mtlICBConcurrentDispatch  = 1 << 5 // MTLIndirectCommandTypeConcurrentDispatch
	mtlGPUFamilyApple9        = 1009   // MTLGPUFamilyApple9 (M3 and later)
	mtlStatusCompleted        = 4      // MTLCommandBufferStatusCompleted
	mtlStatusError            = 5      // MTLCommandBufferStatusError
	mtlMaxKernelBufferBinding = 31
)

// Open starts a backend on the system's default Metal device.
func Open(k Kernels, opt Options) (*Backend, error) {
	dev, err := openSystemDevice()
	if err != nil {
		return nil, err
	}
	return New(dev, k, opt)
}

// systemDevice is Device over the real Metal API. Its Commands keep the
// window in flight: one command buffer and its current encoder.
type systemDevice struct {
	dev, queue id
	info       DeviceInfo
	maps       map[uintptr][]byte // host memory this device mapped, by buffer
	cb, enc    id
	pool       uintptr
	size       [2]mtlSize // dispatch arguments, reused: no allocation per call
}

func openSystemDevice() (*systemDevice, error) {
	if err := loadRuntime(); err != nil {
		return nil, fmt.Errorf("metal: %w", err)
	}
	// The pool must be drained on the thread that pushed it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pool := poolPush()
	defer poolPop(pool)
	dev := createDevice()
	if dev == 0 {
		return nil, errors.New("metal: MTLCreateSystemDefaultDevice returned no device")
	}
	queue := msgID(dev, sel.newCommandQueue)
	if queue == 0 {
		release(dev)
		return nil, errors.New("metal: the device made no command queue")
	}
	d := &systemDevice{dev: dev, queue: queue, maps: map[uintptr][]byte{}}
	d.info = DeviceInfo{
		Name:            goString(msgID(dev, sel.name)),
		MaxBufferLength: int64(msgU(dev, sel.maxBufferLength)),
		PageSize:        int64(os.Getpagesize()),
		ICBNeedsTouch:   !msgBU(dev, sel.supportsFamily, mtlGPUFamilyApple9),
	}
	return d, nil
}

func (d *systemDevice) Info() DeviceInfo { return d.info }

func (d *systemDevice) NewLibrary(source string, version LanguageVersion) (Library, LibraryInfo, error) {
	pool := poolPush()
	defer poolPop(pool)
	opts := newObject(cls.compileOptions)
	defer release(opts)
	msgVoidU(opts, sel.setLanguageVersion, version.Code())
	modes := respondsTo(opts, sel.setMathMode) // macOS 15; fastMathEnabled before
	if modes {
		msgVoidU(opts, sel.setMathMode, mtlMathModeSafe)
	} else {
		msgVoidB(opts, sel.setFastMathEnabled, false)
	}
	src := nsString(source)
	defer release(src)
	var errObj id
	lib := msgIDIDIDE(d.dev, sel.newLibraryWithSource, src, opts, &errObj)
	if lib == 0 {
		return 0, LibraryInfo{}, nsError(errObj, "newLibraryWithSource")
	}
	info := LibraryInfo{LanguageVersion: LanguageVersionOf(msgU(opts, sel.languageVersion))}
	if modes {
		info.SafeMath = msgU(opts, sel.mathMode) == mtlMathModeSafe
	} else {
		info.SafeMath = !msgB(opts, sel.fastMathEnabled)
	}
	return Library(lib), info, nil
}

func (d *systemDevice) FunctionConstants(lib Library, name string) ([]DeclaredConstant, bool, error) {
	pool := poolPush()
	defer poolPop(pool)
	n := nsString(name)
	defer release(n)
	fn := msgIDID(id(lib), sel.newFunctionWithName, n)
	if fn == 0 {
		return nil, false, fmt.Errorf("the library has no function %s", name)
	}
	defer release(fn)
	values := msgID(msgID(fn, sel.functionConstantsDict), sel.allValues)
	out := []DeclaredConstant{}
	for i := uint64(0); i < msgU(values, sel.count); i++ {
		c := msgIDU(values, sel.objectAtIndex, i)
		out = append(out, DeclaredConstant{
			Name:     goString(msgID(c, sel.name)),
			Index:    int(msgU(c, sel.index)),
			Type:     DataType(msgU(c, sel.dataType)),
			Required: msgB(c, sel.required),
		})
	}
	return out, true, nil
}

func (d *systemDevice) NewPipeline(lib Library, f Function, forICB bool) (Pipeline, PipelineInfo, error) {
	pool := poolPush()
	defer poolPop(pool)
	values := newObject(cls.constantValues)
	defer release(values)
	for _, c := range f.Constants {
		v := c.Type.Encode(c.Value) // copied by Metal during the call
		msgVoidPUU(values, sel.setConstantValue, unsafe.Pointer(&v[0]), uint64(c.Type), uint64(c.Index))
	}
	n := nsString(f.Name)
	defer release(n)
	var errObj id
	fn := msgIDIDIDE(id(lib), sel.newFunctionWithNameConstantValues, n, values, &errObj)
	if fn == 0 {
		return 0, PipelineInfo{}, nsError(errObj, "newFunctionWithName:constantValues")
	}
	defer release(fn)
	desc := newObject(cls.pipelineDescriptor)
	defer release(desc)
	msgVoidID(desc, sel.setComputeFunction, fn)
	msgVoidB(desc, sel.setSupportICB, forICB)
	setLabel(desc, f.Key())
	errObj = 0
	pso := msgIDIDUPE(d.dev, sel.newPipelineWithDescriptor, desc, 0, nil, &errObj)
	if pso == 0 {
		return 0, PipelineInfo{}, nsError(errObj, "newComputePipelineStateWithDescriptor")
	}
	return Pipeline(pso), PipelineInfo{
		MaxTotalThreadsPerThreadgroup: int(msgU(pso, sel.maxTotalThreadsPerThreadgroup)),
		ThreadExecutionWidth:          int(msgU(pso, sel.threadExecutionWidth)),
	}, nil
}

// NewBuffer maps fresh anonymous memory (page-aligned, whole pages) and wraps
// it without a copy, so the host reads and writes it in place.
func (d *systemDevice) NewBuffer(label string, size int64) (Buffer, []byte, error) {
	page := d.info.PageSize
	n := (max(size, 1) + page - 1) / page * page
	mem, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return 0, nil, fmt.Errorf("mapping %d bytes: %w", n, err)
	}
	b, err := d.WrapBuffer(label, mem)
	if err != nil {
		_ = syscall.Munmap(mem)
		return 0, nil, err
	}
	d.maps[uintptr(b)] = mem
	return b, mem[:size:size], nil
}

func (d *systemDevice) WrapBuffer(label string, host []byte) (Buffer, error) {
	pool := poolPush()
	defer poolPop(pool)
	b := msgIDPUUID(d.dev, sel.newBufferNoCopy, unsafe.Pointer(unsafe.SliceData(host)), uint64(len(host)), mtlResourceShared, 0)
	if b == 0 {
		return 0, fmt.Errorf("newBufferWithBytesNoCopy of %d bytes returned no buffer", len(host))
	}
	setLabel(b, label)
	return Buffer(b), nil
}

func (d *systemDevice) NewEvent() (Event, error) {
	e := msgID(d.dev, sel.newSharedEvent)
	if e == 0 {
		return 0, errors.New("newSharedEvent returned no event")
	}
	return Event(e), nil
}

func (d *systemDevice) NewICB(commands int) (ICB, error) {
	pool := poolPush()
	defer poolPop(pool)
	desc := newObject(cls.icbDescriptor)
	defer release(desc)
	msgVoidU(desc, sel.setCommandTypes, mtlICBConcurrentDispatch)
	msgVoidB(desc, sel.setInheritBuffers, false)
	msgVoidB(desc, sel.setInheritPipelineState, false)
	msgVoidU(desc, sel.setMaxKernelBuffers, mtlMaxKernelBufferBinding)
	icb := msgIDIDUU(d.dev, sel.newICB, desc, uint64(commands), mtlResourceShared)
	if icb == 0 {
		return 0, errors.New("newIndirectCommandBufferWithDescriptor returned no buffer")
	}
	return ICB(icb), nil
}

func (d *systemDevice) EncodeICB(icb ICB, index int, c ICBCommand) {
	pool := poolPush() // the command object is autoreleased, and loading has no window pool
	defer poolPop(pool)
	cmd := msgIDU(id(icb), sel.icbCommandAtIndex, uint64(index))
	msgVoidID(cmd, sel.setPipelineState, id(c.Pipeline))
	for _, b := range c.Buffers {
		msgVoidIDUU(cmd, sel.setKernelBuffer, id(b.Buffer), uint64(b.Offset), uint64(b.Slot))
	}
	d.size[0], d.size[1] = sizeOf(c.Grid), sizeOf(c.Threadgroup)
	msgVoidSS(cmd, sel.concurrentDispatch, &d.size[0], &d.size[1])
	if c.Barrier {
		msgVoid(cmd, sel.setBarrier)
	} else {
		msgVoid(cmd, sel.clearBarrier)
	}
}

func (d *systemDevice) Release(object uintptr) {
	release(id(object))
	if mem, ok := d.maps[object]; ok {
		_ = syscall.Munmap(mem)
		delete(d.maps, object)
	}
}

func (d *systemDevice) Close() {
	for o := range d.maps {
		d.Release(o)
	}
	release(d.queue)
	release(d.dev)
	d.queue, d.dev = 0, 0
}

func (d *systemDevice) BeginWindow() error {
	d.pool = poolPush()
	d.cb = msgID(d.queue, sel.commandBufferUnretained)
	if d.cb == 0 {
		poolPop(d.pool)
		return errors.New("commandBufferWithUnretainedReferences returned no buffer")
	}
	return nil
}

func (d *systemDevice) BeginPass() {
	d.enc = msgIDU(d.cb, sel.computeEncoderWithDispatchType, mtlDispatchConcurrent)
}

func (d *systemDevice) SetPipeline(p Pipeline) { msgVoidID(d.enc, sel.setPipelineState, id(p)) }

func (d *systemDevice) SetBuffer(b Buffer, offset int64, slot int) {
	msgVoidIDUU(d.enc, sel.setBuffer, id(b), uint64(offset), uint64(slot))
}

func (d *systemDevice) SetBytes(data []byte, slot int) {
	msgVoidPUU(d.enc, sel.setBytes, unsafe.Pointer(unsafe.SliceData(data)), uint64(len(data)), uint64(slot))
}

func (d *systemDevice) Dispatch(grid, threadgroup [3]int) {
	d.size[0], d.size[1] = sizeOf(grid), sizeOf(threadgroup)
	msgVoidSS(d.enc, sel.dispatchThreadgroups, &d.size[0], &d.size[1])
}

func (d *systemDevice) MemoryBarrier() { msgVoidU(d.enc, sel.memoryBarrier, mtlBarrierScopeBuffers) }

func (d *systemDevice) UseResources(bufs []Buffer) {
	if len(bufs) > 0 { // Buffer is an id: the slice is the id array Metal reads
		msgVoidPUU(d.enc, sel.useResources, unsafe.Pointer(unsafe.SliceData(bufs)), uint64(len(bufs)), mtlUsageReadWrite)
	}
}

func (d *systemDevice) ExecuteICB(icb ICB, first, count int) {
	msgVoidIDUU(d.enc, sel.executeCommands, id(icb), uint64(first), uint64(count))
}

func (d *systemDevice) EndPass() {
	msgVoid(d.enc, sel.endEncoding)
	d.enc = 0
}

func (d *systemDevice) EncodeSignal(e Event, value uint64) {
	msgVoidIDU(d.cb, sel.encodeSignal, id(e), value)
}

func (d *systemDevice) EncodeWait(e Event, value uint64) {
	msgVoidIDU(d.cb, sel.encodeWait, id(e), value)
}

func (d *systemDevice) Commit() { msgVoid(d.cb, sel.commit) }

func (d *systemDevice) SignaledValue(e Event) uint64 { return msgU(id(e), sel.signaledValue) }

func (d *systemDevice) SetSignaledValue(e Event, value uint64) {
	msgVoidU(id(e), sel.setSignaledValue, value)
}

// Status reads the command buffer's status; a fault is reported here, since
// a finished buffer is not a successful one.
func (d *systemDevice) Status() (bool, error) {
	switch msgU(d.cb, sel.status) {
	case mtlStatusCompleted:
		return true, nil
	case mtlStatusError:
		return true, nsError(msgID(d.cb, sel.errorSel), "command buffer")
	}
	return false, nil
}

func (d *systemDevice) GPUTime() time.Duration {
	s := msgF64(d.cb, sel.gpuEndTime) - msgF64(d.cb, sel.gpuStartTime)
	return time.Duration(s * float64(time.Second))
}

func (d *systemDevice) EndWindow() {
	d.cb, d.enc = 0, 0
	poolPop(d.pool)
}
