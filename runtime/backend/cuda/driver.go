package cuda

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// driver is the CUDA driver API (libcuda), loaded with purego: no cgo.
type driver struct {
	path string

	init               func(flags uint32) int32
	driverVersion      func(v *int32) int32
	deviceGet          func(dev *int32, ordinal int32) int32
	deviceGetCount     func(n *int32) int32
	deviceGetName      func(name *byte, n int32, dev int32) int32
	deviceGetAttribute func(v *int32, attr int32, dev int32) int32
	primaryCtxRetain   func(ctx *uintptr, dev int32) int32
	primaryCtxRelease  func(dev int32) int32
	ctxSetCurrent      func(ctx uintptr) int32
	ctxSynchronize     func() int32
	getErrorString     func(r int32, s **byte) int32
	memGetInfo         func(free, total *uintptr) int32

	memAllocManaged func(p *uintptr, size uintptr, flags uint32) int32
	memAlloc        func(p *uintptr, size uintptr) int32
	memFree         func(p uintptr) int32
	memHostAlloc    func(p *unsafe.Pointer, size uintptr, flags uint32) int32
	memHostDevPtr   func(d *uintptr, p unsafe.Pointer, flags uint32) int32
	memFreeHost     func(p unsafe.Pointer) int32
	memcpyDtoDAsync func(dst, src uintptr, n uintptr, s uintptr) int32
	memcpyHtoDAsync func(dst uintptr, src unsafe.Pointer, n uintptr, s uintptr) int32
	memcpyHtoD      func(dst uintptr, src unsafe.Pointer, n uintptr) int32
	memcpyDtoH      func(dst unsafe.Pointer, src uintptr, n uintptr) int32
	memsetD8Async   func(dst uintptr, v uint8, n uintptr, s uintptr) int32

	moduleLoadData    func(m *uintptr, image *byte) int32
	moduleUnload      func(m uintptr) int32
	moduleGetFunction func(f *uintptr, m uintptr, name *byte) int32
	funcGetAttribute  func(v *int32, attr int32, f uintptr) int32
	launchKernel      func(f uintptr, gx, gy, gz, bx, by, bz uint32, shmem uint32, s uintptr, params *unsafe.Pointer, extra *unsafe.Pointer) int32

	streamCreate      func(s *uintptr, flags uint32) int32
	streamDestroy     func(s uintptr) int32
	streamSynchronize func(s uintptr) int32
	streamWaitEvent   func(s, e uintptr, flags uint32) int32
	eventCreate       func(e *uintptr, flags uint32) int32
	eventDestroy      func(e uintptr) int32
	eventRecord       func(e, s uintptr) int32
	eventSynchronize  func(e uintptr) int32
	eventElapsedTime  func(ms *float32, a, b uintptr) int32
	streamWaitValue32 func(s uintptr, addr uintptr, v uint32, flags uint32) int32
	streamWriteValue  func(s uintptr, addr uintptr, v uint32, flags uint32) int32

	beginCapture      func(s uintptr, mode int32) int32
	endCapture        func(s uintptr, g *uintptr) int32
	graphInstantiate  func(e *uintptr, g uintptr, flags uint64) int32
	graphLaunch       func(e, s uintptr) int32
	graphExecDestroy  func(e uintptr) int32
	graphDestroy      func(g uintptr) int32
	graphGetNodes     func(g uintptr, nodes *uintptr, n *uintptr) int32
	graphGetRootNodes func(g uintptr, nodes *uintptr, n *uintptr) int32
	graphGetEdges     func(g uintptr, from, to *uintptr, n *uintptr) int32             // before CUDA 12.3
	graphGetEdgesV2   func(g uintptr, from, to *uintptr, data *byte, n *uintptr) int32 // CUDA 12.3 on
}

// Driver API constants used here (cuda.h).
const (
	attrMaxThreadsPerBlock      = 1
	attrMaxSharedPerBlock       = 8
	attrMultiprocessors         = 16
	attrComputeMajor            = 75
	attrComputeMinor            = 76
	attrConcurrentManagedAccess = 89
	attrL2Size                  = 38
	attrMemoryClockKHz          = 36
	attrBusWidth                = 37

	funcMaxThreads         = 0
	funcSharedBytes        = 1
	funcNumRegs            = 4
	funcLocalBytes         = 3
	memAttachGlobal        = 1
	hostAllocPortable      = 1
	hostAllocDevMap        = 2
	streamNonBlocking      = 1
	eventDisableTiming     = 2
	captureModeThreadLocal = 1
	waitValueGEQ           = 0
)

var driverNames = []string{"libcuda.so.1", "libcuda.so", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1"}

var (
	driverOnce sync.Once
	driverLib  *driver
	driverErr  error
)

// loadDriver opens libcuda and initializes it, once per process.
func loadDriver() (*driver, error) {
	driverOnce.Do(func() { driverLib, driverErr = openDriver() })
	return driverLib, driverErr
}

func openDriver() (*driver, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("cuda: the CUDA backend runs on Linux, not %s", runtime.GOOS)
	}
	names := libNames("STRATA_LIBCUDA", driverNames)
	h, name, err := dlopenFirst(names)
	if err != nil {
		return nil, fmt.Errorf("cuda: no libcuda loads (tried %s; STRATA_LIBCUDA names one): no NVIDIA driver here (first: %w)", strings.Join(names, ", "), err)
	}
	d := &driver{path: name}
	syms := map[string]any{
		"cuInit": &d.init, "cuDriverGetVersion": &d.driverVersion, "cuDeviceGet": &d.deviceGet,
		"cuDeviceGetCount": &d.deviceGetCount, "cuDeviceGetName": &d.deviceGetName,
		"cuDeviceGetAttribute": &d.deviceGetAttribute, "cuDevicePrimaryCtxRetain": &d.primaryCtxRetain,
		"cuDevicePrimaryCtxRelease_v2": &d.primaryCtxRelease, "cuCtxSetCurrent": &d.ctxSetCurrent,
		"cuCtxSynchronize": &d.ctxSynchronize, "cuGetErrorString": &d.getErrorString, "cuMemGetInfo_v2": &d.memGetInfo,
		"cuMemAllocManaged": &d.memAllocManaged, "cuMemAlloc_v2": &d.memAlloc, "cuMemFree_v2": &d.memFree,
		"cuMemHostAlloc": &d.memHostAlloc, "cuMemHostGetDevicePointer_v2": &d.memHostDevPtr, "cuMemFreeHost": &d.memFreeHost,
		"cuMemcpyDtoDAsync_v2": &d.memcpyDtoDAsync,
		"cuMemcpyHtoDAsync_v2": &d.memcpyHtoDAsync, "cuMemcpyHtoD_v2": &d.memcpyHtoD, "cuMemcpyDtoH_v2": &d.memcpyDtoH, "cuMemsetD8Async": &d.memsetD8Async,
		"cuModuleLoadData": &d.moduleLoadData, "cuModuleUnload": &d.moduleUnload, "cuModuleGetFunction": &d.moduleGetFunction,
		"cuFuncGetAttribute": &d.funcGetAttribute, "cuLaunchKernel": &d.launchKernel,
		"cuStreamCreate": &d.streamCreate, "cuStreamDestroy_v2": &d.streamDestroy, "cuStreamSynchronize": &d.streamSynchronize,
		"cuStreamWaitEvent": &d.streamWaitEvent, "cuEventCreate": &d.eventCreate, "cuEventDestroy_v2": &d.eventDestroy,
		"cuEventRecord": &d.eventRecord, "cuEventSynchronize": &d.eventSynchronize, "cuEventElapsedTime_v2|cuEventElapsedTime": &d.eventElapsedTime,
		"cuStreamWaitValue32_v2": &d.streamWaitValue32, "cuStreamWriteValue32_v2": &d.streamWriteValue,
		"cuStreamBeginCapture_v2": &d.beginCapture, "cuStreamEndCapture": &d.endCapture,
		"cuGraphInstantiateWithFlags": &d.graphInstantiate, "cuGraphLaunch": &d.graphLaunch,
		"cuGraphExecDestroy": &d.graphExecDestroy, "cuGraphDestroy": &d.graphDestroy, "cuGraphGetNodes": &d.graphGetNodes,
		"cuGraphGetRootNodes": &d.graphGetRootNodes,
	}
	for syms, fn := range syms {
		found := false
		for _, sym := range strings.Split(syms, "|") {
			if _, err := purego.Dlsym(h, sym); err == nil {
				purego.RegisterLibFunc(fn, h, sym)
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("cuda: %s has no %s", name, syms)
		}
	}
	// Edges are only counted for reports: either version will do.
	if _, err := purego.Dlsym(h, "cuGraphGetEdges_v2"); err == nil {
		purego.RegisterLibFunc(&d.graphGetEdgesV2, h, "cuGraphGetEdges_v2")
	} else if _, err := purego.Dlsym(h, "cuGraphGetEdges"); err == nil {
		purego.RegisterLibFunc(&d.graphGetEdges, h, "cuGraphGetEdges")
	}
	if err := d.check("cuInit", d.init(0)); err != nil {
		return nil, err
	}
	return d, nil
}

// libNames is the one path $env names, or else the default candidates.
func libNames(env string, defaults []string) []string {
	if p := os.Getenv(env); p != "" {
		return []string{p}
	}
	return defaults
}

// dlopenFirst opens the first of names that loads; when none does, the
// error is the first one's.
func dlopenFirst(names []string) (h uintptr, name string, err error) {
	first := errors.New("no library names")
	for i, name := range names {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			return h, name, nil
		}
		if i == 0 {
			first = err
		}
	}
	return 0, "", first
}

// check turns a CUresult into an error naming the call.
func (d *driver) check(call string, r int32) error {
	if r == 0 {
		return nil
	}
	var s *byte
	msg := "unknown error"
	if d.getErrorString(r, &s) == 0 && s != nil {
		msg = goString(s)
	}
	return fmt.Errorf("cuda: %s: %s (CUresult %d)", call, msg, r)
}

func goString(p *byte) string {
	var b []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		b = append(b, *(*byte)(q))
	}
	return string(b)
}
