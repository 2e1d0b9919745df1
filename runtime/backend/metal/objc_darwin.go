//go:build darwin && arm64

package metal

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"
)

// The Objective-C runtime as the backend calls it: objc_msgSend bound once
// per Go signature with purego.RegisterFunc (objc.Send would build a
// reflection wrapper on every call), selectors and classes registered once
// (sel_registerName takes the runtime's global lock).

type id = objc.ID

// mtlSize is MTLSize. At 24 bytes AAPCS64 passes it by reference (the caller
// copies it and passes a pointer), so a pointer argument makes the same call.
type mtlSize struct{ width, height, depth uint64 }

func sizeOf(v [3]int) mtlSize { return mtlSize{uint64(v[0]), uint64(v[1]), uint64(v[2])} }

// objc_msgSend, one typed binding per signature; the comment names the
// selectors each one sends.
var (
	msgID        func(id, objc.SEL) id                                     // new, alloc, commandBufferWithUnretainedReferences, name, allValues, error, localizedDescription, newCommandQueue, newSharedEvent
	msgIDU       func(id, objc.SEL, uint64) id                             // computeCommandEncoderWithDispatchType:, indirectComputeCommandAtIndex:, objectAtIndex:
	msgIDID      func(id, objc.SEL, id) id                                 // newFunctionWithName:
	msgVoid      func(id, objc.SEL)                                        // release, commit, endEncoding, setBarrier, clearBarrier
	msgVoidID    func(id, objc.SEL, id)                                    // setComputePipelineState:, setComputeFunction:, setLabel:
	msgVoidU     func(id, objc.SEL, uint64)                                // memoryBarrierWithScope:, setSignaledValue:, setLanguageVersion:, setMathMode:, setCommandTypes:, setMaxKernelBufferBindCount:
	msgVoidB     func(id, objc.SEL, bool)                                  // setFastMathEnabled:, setInheritBuffers:, setInheritPipelineState:, setSupportIndirectCommandBuffers:
	msgVoidIDU   func(id, objc.SEL, id, uint64)                            // encodeSignalEvent:value:, encodeWaitForEvent:value:
	msgVoidIDUU  func(id, objc.SEL, id, uint64, uint64)                    // setBuffer:offset:atIndex:, setKernelBuffer:offset:atIndex:, executeCommandsInBuffer:withRange: (NSRange as two words)
	msgVoidPUU   func(id, objc.SEL, unsafe.Pointer, uint64, uint64)        // setBytes:length:atIndex:, useResources:count:usage:, setConstantValue:type:atIndex:
	msgVoidSS    func(id, objc.SEL, *mtlSize, *mtlSize)                    // dispatchThreadgroups:threadsPerThreadgroup:, concurrentDispatchThreadgroups:threadsPerThreadgroup:
	msgU         func(id, objc.SEL) uint64                                 // status, signaledValue, count, index, type, languageVersion, mathMode, maxBufferLength, maxTotalThreadsPerThreadgroup, threadExecutionWidth
	msgB         func(id, objc.SEL) bool                                   // required, fastMathEnabled
	msgBU        func(id, objc.SEL, uint64) bool                           // supportsFamily:
	msgBSel      func(id, objc.SEL, objc.SEL) bool                         // respondsToSelector:
	msgF64       func(id, objc.SEL) float64                                // GPUStartTime, GPUEndTime
	msgStr       func(id, objc.SEL) string                                 // UTF8String
	msgIDPUU     func(id, objc.SEL, unsafe.Pointer, uint64, uint64) id     // initWithBytes:length:encoding:
	msgIDPUUID   func(id, objc.SEL, unsafe.Pointer, uint64, uint64, id) id // newBufferWithBytesNoCopy:length:options:deallocator:
	msgIDIDUU    func(id, objc.SEL, id, uint64, uint64) id                 // newIndirectCommandBufferWithDescriptor:maxCommandCount:options:
	msgIDIDIDE   func(id, objc.SEL, id, id, *id) id                        // newLibraryWithSource:options:error:, newFunctionWithName:constantValues:error:
	msgIDIDUPE   func(id, objc.SEL, id, uint64, unsafe.Pointer, *id) id    // newComputePipelineStateWithDescriptor:options:reflection:error:
	createDevice func() id                                                 // MTLCreateSystemDefaultDevice
	poolPush     func() uintptr                                            // objc_autoreleasePoolPush
	poolPop      func(uintptr)                                             // objc_autoreleasePoolPop
)

// sel holds every selector the backend sends.
var sel struct {
	alloc, new, release, respondsToSelector                                          objc.SEL
	initWithBytesLengthEncoding, utf8String, localizedDescription, setLabel          objc.SEL
	count, objectAtIndex, allValues                                                  objc.SEL
	name, maxBufferLength, supportsFamily, newCommandQueue, newSharedEvent           objc.SEL
	newLibraryWithSource, setLanguageVersion, languageVersion                        objc.SEL
	setMathMode, mathMode, setFastMathEnabled, fastMathEnabled                       objc.SEL
	newFunctionWithName, newFunctionWithNameConstantValues, functionConstantsDict    objc.SEL
	index, dataType, required, setConstantValue                                      objc.SEL
	setComputeFunction, setSupportICB, newPipelineWithDescriptor                     objc.SEL
	maxTotalThreadsPerThreadgroup, threadExecutionWidth                              objc.SEL
	newBufferNoCopy                                                                  objc.SEL
	setCommandTypes, setInheritBuffers, setInheritPipelineState, setMaxKernelBuffers objc.SEL
	newICB, icbCommandAtIndex, setKernelBuffer, concurrentDispatch                   objc.SEL
	setBarrier, clearBarrier                                                         objc.SEL
	commandBufferUnretained, computeEncoderWithDispatchType, endEncoding             objc.SEL
	setPipelineState, setBuffer, setBytes, dispatchThreadgroups, memoryBarrier       objc.SEL
	useResources, executeCommands, encodeSignal, encodeWait, commit                  objc.SEL
	signaledValue, setSignaledValue, status, errorSel, gpuStartTime, gpuEndTime      objc.SEL
}

// cls holds the classes the backend instantiates.
var cls struct {
	nsString, compileOptions, constantValues, pipelineDescriptor, icbDescriptor objc.Class
}

var (
	loadOnce sync.Once
	loadErr  error
)

// loadRuntime binds the Objective-C runtime, Metal and CoreGraphics once.
func loadRuntime() error {
	loadOnce.Do(func() { loadErr = load() })
	return loadErr
}

const rtld = purego.RTLD_GLOBAL | purego.RTLD_NOW

func load() error {
	libobjc, err := purego.Dlopen("/usr/lib/libobjc.A.dylib", rtld)
	if err != nil {
		return fmt.Errorf("loading libobjc: %w", err)
	}
	msgSend, err := purego.Dlsym(libobjc, "objc_msgSend")
	if err != nil {
		return fmt.Errorf("objc_msgSend: %w", err)
	}
	for _, fn := range []any{&msgID, &msgIDU, &msgIDID, &msgVoid, &msgVoidID, &msgVoidU, &msgVoidB, &msgVoidIDU,
		&msgVoidIDUU, &msgVoidPUU, &msgVoidSS, &msgU, &msgB, &msgBU, &msgBSel, &msgF64, &msgStr, &msgIDPUU,
		&msgIDPUUID, &msgIDIDUU, &msgIDIDIDE, &msgIDIDUPE} {
		purego.RegisterFunc(fn, msgSend)
	}
	if err := bind(libobjc, "objc_autoreleasePoolPush", &poolPush); err != nil {
		return err
	}
	if err := bind(libobjc, "objc_autoreleasePoolPop", &poolPop); err != nil {
		return err
	}
	// A command-line tool must load CoreGraphics before
	// MTLCreateSystemDefaultDevice will return a device.
	if _, err := purego.Dlopen("/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics", rtld); err != nil {
		return fmt.Errorf("loading CoreGraphics: %w", err)
	}
	if _, err := purego.Dlopen("/System/Library/Frameworks/Foundation.framework/Foundation", rtld); err != nil {
		return fmt.Errorf("loading Foundation: %w", err)
	}
	metal, err := purego.Dlopen("/System/Library/Frameworks/Metal.framework/Metal", rtld)
	if err != nil {
		return fmt.Errorf("loading Metal: %w", err)
	}
	if err := bind(metal, "MTLCreateSystemDefaultDevice", &createDevice); err != nil {
		return err
	}
	for _, s := range []struct {
		p    *objc.SEL
		name string
	}{
		{&sel.alloc, "alloc"}, {&sel.new, "new"}, {&sel.release, "release"}, {&sel.respondsToSelector, "respondsToSelector:"},
		{&sel.initWithBytesLengthEncoding, "initWithBytes:length:encoding:"}, {&sel.utf8String, "UTF8String"},
		{&sel.localizedDescription, "localizedDescription"}, {&sel.setLabel, "setLabel:"},
		{&sel.count, "count"}, {&sel.objectAtIndex, "objectAtIndex:"}, {&sel.allValues, "allValues"},
		{&sel.name, "name"}, {&sel.maxBufferLength, "maxBufferLength"}, {&sel.supportsFamily, "supportsFamily:"},
		{&sel.newCommandQueue, "newCommandQueue"}, {&sel.newSharedEvent, "newSharedEvent"},
		{&sel.newLibraryWithSource, "newLibraryWithSource:options:error:"},
		{&sel.setLanguageVersion, "setLanguageVersion:"}, {&sel.languageVersion, "languageVersion"},
		{&sel.setMathMode, "setMathMode:"}, {&sel.mathMode, "mathMode"},
		{&sel.setFastMathEnabled, "setFastMathEnabled:"}, {&sel.fastMathEnabled, "fastMathEnabled"},
		{&sel.newFunctionWithName, "newFunctionWithName:"},
		{&sel.newFunctionWithNameConstantValues, "newFunctionWithName:constantValues:error:"},
		{&sel.functionConstantsDict, "functionConstantsDictionary"},
		{&sel.index, "index"}, {&sel.dataType, "type"}, {&sel.required, "required"},
		{&sel.setConstantValue, "setConstantValue:type:atIndex:"},
		{&sel.setComputeFunction, "setComputeFunction:"}, {&sel.setSupportICB, "setSupportIndirectCommandBuffers:"},
		{&sel.newPipelineWithDescriptor, "newComputePipelineStateWithDescriptor:options:reflection:error:"},
		{&sel.maxTotalThreadsPerThreadgroup, "maxTotalThreadsPerThreadgroup"}, {&sel.threadExecutionWidth, "threadExecutionWidth"},
		{&sel.newBufferNoCopy, "newBufferWithBytesNoCopy:length:options:deallocator:"},
		{&sel.setCommandTypes, "setCommandTypes:"}, {&sel.setInheritBuffers, "setInheritBuffers:"},
		{&sel.setInheritPipelineState, "setInheritPipelineState:"}, {&sel.setMaxKernelBuffers, "setMaxKernelBufferBindCount:"},
		{&sel.newICB, "newIndirectCommandBufferWithDescriptor:maxCommandCount:options:"},
		{&sel.icbCommandAtIndex, "indirectComputeCommandAtIndex:"}, {&sel.setKernelBuffer, "setKernelBuffer:offset:atIndex:"},
		{&sel.concurrentDispatch, "concurrentDispatchThreadgroups:threadsPerThreadgroup:"},
		{&sel.setBarrier, "setBarrier"}, {&sel.clearBarrier, "clearBarrier"},
		{&sel.commandBufferUnretained, "commandBufferWithUnretainedReferences"},
		{&sel.computeEncoderWithDispatchType, "computeCommandEncoderWithDispatchType:"}, {&sel.endEncoding, "endEncoding"},
		{&sel.setPipelineState, "setComputePipelineState:"}, {&sel.setBuffer, "setBuffer:offset:atIndex:"},
		{&sel.setBytes, "setBytes:length:atIndex:"}, {&sel.dispatchThreadgroups, "dispatchThreadgroups:threadsPerThreadgroup:"},
		{&sel.memoryBarrier, "memoryBarrierWithScope:"}, {&sel.useResources, "useResources:count:usage:"},
		{&sel.executeCommands, "executeCommandsInBuffer:withRange:"},
		{&sel.encodeSignal, "encodeSignalEvent:value:"}, {&sel.encodeWait, "encodeWaitForEvent:value:"}, {&sel.commit, "commit"},
		{&sel.signaledValue, "signaledValue"}, {&sel.setSignaledValue, "setSignaledValue:"}, {&sel.status, "status"},
		{&sel.errorSel, "error"}, {&sel.gpuStartTime, "GPUStartTime"}, {&sel.gpuEndTime, "GPUEndTime"},
	} {
		*s.p = objc.RegisterName(s.name)
	}
	for _, c := range []struct {
		p    *objc.Class
		name string
	}{
		{&cls.nsString, "NSString"}, {&cls.compileOptions, "MTLCompileOptions"},
		{&cls.constantValues, "MTLFunctionConstantValues"}, {&cls.pipelineDescriptor, "MTLComputePipelineDescriptor"},
		{&cls.icbDescriptor, "MTLIndirectCommandBufferDescriptor"},
	} {
		if *c.p = objc.GetClass(c.name); *c.p == 0 {
			return fmt.Errorf("the Objective-C runtime has no class %s", c.name)
		}
	}
	return nil
}

// bind registers fn as the C function name of lib.
func bind(lib uintptr, name string, fn any) error {
	sym, err := purego.Dlsym(lib, name)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	purego.RegisterFunc(fn, sym)
	return nil
}

// newObject is [[class new]]: retained, the caller releases it.
func newObject(c objc.Class) id { return msgID(id(c), sel.new) }

func release(o id) {
	if o != 0 {
		msgVoid(o, sel.release)
	}
}

// nsString makes a retained NSString holding s.
func nsString(s string) id {
	return msgIDPUU(msgID(id(cls.nsString), sel.alloc), sel.initWithBytesLengthEncoding,
		unsafe.Pointer(unsafe.StringData(s)), uint64(len(s)), 4 /* NSUTF8StringEncoding */)
}

func goString(s id) string {
	if s == 0 {
		return ""
	}
	return msgStr(s, sel.utf8String)
}

// nsError turns an NSError into a Go error.
func nsError(e id, what string) error {
	if e == 0 {
		return errors.New(what + " failed with no NSError")
	}
	return fmt.Errorf("%s: %s", what, goString(msgID(e, sel.localizedDescription)))
}

func setLabel(o id, label string) {
	s := nsString(label)
	msgVoidID(o, sel.setLabel, s)
	release(s)
}

func respondsTo(o id, s objc.SEL) bool { return msgBSel(o, sel.respondsToSelector, s) }
