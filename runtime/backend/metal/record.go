package metal

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/strata-llm/strata/runtime/backend"
)

// OpKind names a recorded Objective-C call of a window.
type OpKind int

// The recorded calls, one per Commands method.
const (
	OpBeginWindow OpKind = iota
	OpBeginPass
	OpSetPipeline
	OpSetBuffer
	OpSetBytes
	OpDispatch
	OpBarrier
	OpUseResources
	OpExecuteICB
	OpEndPass
	OpSignal
	OpWait
	OpCommit
	OpEndWindow
)

var opNames = [...]string{"BeginWindow", "BeginPass", "SetPipeline", "SetBuffer", "SetBytes", "Dispatch", "Barrier",
	"UseResources", "ExecuteICB", "EndPass", "Signal", "Wait", "Commit", "EndWindow"}

func (k OpKind) String() string {
	if int(k) < len(opNames) {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", int(k))
}

// Op is one recorded call with its arguments.
type Op struct {
	Kind        OpKind
	Pipeline    Pipeline // SetPipeline
	Buffer      Buffer   // SetBuffer
	Offset      int64    // SetBuffer
	Slot        int      // SetBuffer, SetBytes
	Bytes       []byte   // SetBytes
	Grid        [3]int   // Dispatch
	Threadgroup [3]int   // Dispatch
	Buffers     []Buffer // UseResources
	ICB         ICB      // ExecuteICB
	First       int      // ExecuteICB
	Count       int      // ExecuteICB
	Event       Event    // Signal, Wait
	Value       uint64   // Signal, Wait
}

func (o Op) String() string {
	switch o.Kind {
	case OpSetPipeline:
		return fmt.Sprintf("SetPipeline(%d)", o.Pipeline)
	case OpSetBuffer:
		return fmt.Sprintf("SetBuffer(%d, %d, slot %d)", o.Buffer, o.Offset, o.Slot)
	case OpSetBytes:
		return fmt.Sprintf("SetBytes(%x, slot %d)", o.Bytes, o.Slot)
	case OpDispatch:
		return fmt.Sprintf("Dispatch(%v, %v)", o.Grid, o.Threadgroup)
	case OpUseResources:
		return fmt.Sprintf("UseResources(%v)", o.Buffers)
	case OpExecuteICB:
		return fmt.Sprintf("ExecuteICB(%d, [%d,+%d))", o.ICB, o.First, o.Count)
	case OpSignal, OpWait:
		return fmt.Sprintf("%s(%d, %d)", o.Kind, o.Event, o.Value)
	}
	return o.Kind.String()
}

// Recorder is a Device that records every call instead of making it, on any
// platform, so the encoding of a window can be checked without a Mac. It
// also plays a GPU that follows the recorded stream: a committed window runs
// up to the first wait whose event value the host has not set yet, so the
// host-point protocol runs end to end.
type Recorder struct {
	mu   sync.Mutex
	info DeviceInfo

	// HostLimit: buffers up to this size get host memory, larger ones none.
	HostLimit int64
	// MaxThreads is every pipeline's maxTotalThreadsPerThreadgroup.
	MaxThreads int
	// Reported overrides the library info read back (a compiler that
	// ignored the options); nil reports what was asked.
	Reported *LibraryInfo
	// Declared lists each function's constants, as a library would; nil:
	// unknown (no check).
	Declared map[string][]DeclaredConstant
	// Execute, when set, runs every dispatch the simulated GPU reaches, with
	// what the encoder has bound at that point (a GPU stand-in such as the
	// MSL emulator); an error fails the command buffer.
	Execute func(Launch) error

	next      uintptr
	ops       []Op
	sources   []string
	functions map[Pipeline]Function
	forICB    map[Pipeline]bool
	labels    map[Buffer]string
	hosts     map[Buffer][]byte
	icbs      map[ICB][]ICBCommand
	live      map[uintptr]string
	fail      error

	// the simulated GPU of the window in flight
	inWindow  bool
	committed bool
	pc, end   int // next op to run, first op after the commit
	events    map[Event]uint64
	executed  int
	failNow   error
	bound     encoderState  // what the pass being run has bound
	busy      time.Duration // in Execute, this window
}

// Launch is one dispatch as the simulated GPU runs it: the specialized
// function and the host memory bound at each slot (a buffer from its
// binding offset to its end, or setBytes data).
type Launch struct {
	Function    Function
	Slots       map[int][]byte
	Grid        [3]int
	Threadgroup [3]int
}

// encoderState is a compute encoder's bindings: they last for its pass.
type encoderState struct {
	pipeline Pipeline
	slots    map[int][]byte
	errs     map[int]string // slots bound to something without host memory
}

// NewRecorder returns a Recorder describing an Apple9 GPU with 16 KiB pages.
func NewRecorder() *Recorder {
	return &Recorder{
		info:       DeviceInfo{Name: "recorder", MaxBufferLength: 1 << 40, PageSize: 16 << 10},
		HostLimit:  64 << 20,
		MaxThreads: 1024,
		functions:  map[Pipeline]Function{},
		forICB:     map[Pipeline]bool{},
		labels:     map[Buffer]string{},
		hosts:      map[Buffer][]byte{},
		icbs:       map[ICB][]ICBCommand{},
		live:       map[uintptr]string{},
		events:     map[Event]uint64{},
	}
}

// SetInfo changes what Info reports (before the backend starts).
func (r *Recorder) SetInfo(info DeviceInfo) { r.mu.Lock(); r.info = info; r.mu.Unlock() }

// FailNext makes the next committed window fail on the "GPU" with err.
func (r *Recorder) FailNext(err error) { r.mu.Lock(); r.fail = err; r.mu.Unlock() }

// Ops returns a copy of every call recorded so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

// Reset forgets the recorded calls (objects stay).
func (r *Recorder) Reset() { r.mu.Lock(); r.ops = nil; r.mu.Unlock() }

// Function returns the function a pipeline was built from, and whether it
// was built for ICBs.
func (r *Recorder) Function(p Pipeline) (f Function, forICB, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok = r.functions[p]
	return f, r.forICB[p], ok
}

// Label returns the label a buffer was created with.
func (r *Recorder) Label(b Buffer) string { r.mu.Lock(); defer r.mu.Unlock(); return r.labels[b] }

// Contents returns the host memory of a buffer the recorder created (nil
// for buffers over HostLimit).
func (r *Recorder) Contents(b Buffer) []byte { r.mu.Lock(); defer r.mu.Unlock(); return r.hosts[b] }

// ICBCommands returns the commands recorded into an ICB, by index.
func (r *Recorder) ICBCommands(icb ICB) []ICBCommand {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.icbs[icb])
}

// Sources returns the MSL sources compiled, in order.
func (r *Recorder) Sources() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sources)
}

// Live counts the objects created and not released.
func (r *Recorder) Live() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.live) }

// Executed is how many commands the simulated GPU has run in the window in
// flight (zero-grid pipeline touches excluded).
func (r *Recorder) Executed() int { r.mu.Lock(); defer r.mu.Unlock(); return r.executed }

func (r *Recorder) object(kind string) uintptr {
	r.next++
	r.live[r.next] = kind
	return r.next
}

func (r *Recorder) record(o Op) {
	r.mu.Lock()
	r.ops = append(r.ops, o)
	r.mu.Unlock()
}

// Info implements Device.
func (r *Recorder) Info() DeviceInfo { r.mu.Lock(); defer r.mu.Unlock(); return r.info }

// NewLibrary implements Device.
func (r *Recorder) NewLibrary(source string, version LanguageVersion) (Library, LibraryInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sources = append(r.sources, source)
	info := LibraryInfo{LanguageVersion: version, SafeMath: true}
	if r.Reported != nil {
		info = *r.Reported
	}
	return Library(r.object("library")), info, nil
}

// FunctionConstants implements Device.
func (r *Recorder) FunctionConstants(_ Library, name string) ([]DeclaredConstant, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Declared == nil {
		return nil, false, nil
	}
	d, ok := r.Declared[name]
	if !ok {
		return nil, false, fmt.Errorf("no function %s in the library", name)
	}
	return d, true, nil
}

// NewPipeline implements Device.
func (r *Recorder) NewPipeline(_ Library, f Function, forICB bool) (Pipeline, PipelineInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := Pipeline(r.object("pipeline"))
	r.functions[p] = f
	r.forICB[p] = forICB
	return p, PipelineInfo{MaxTotalThreadsPerThreadgroup: r.MaxThreads, ThreadExecutionWidth: 32}, nil
}

// NewBuffer implements Device.
func (r *Recorder) NewBuffer(label string, size int64) (Buffer, []byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if size < 0 {
		return 0, nil, errors.New("negative size")
	}
	b := Buffer(r.object("buffer"))
	r.labels[b] = label
	var host []byte
	if size <= r.HostLimit {
		// Fresh pages, as a device gives them (16 KiB on Apple silicon).
		host = backend.AlignedBytes(size, 16<<10)
		r.hosts[b] = host
	}
	return b, host, nil
}

// WrapBuffer implements Device.
func (r *Recorder) WrapBuffer(label string, host []byte) (Buffer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := Buffer(r.object("buffer"))
	r.labels[b] = label
	r.hosts[b] = host
	return b, nil
}

// NewEvent implements Device.
func (r *Recorder) NewEvent() (Event, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Event(r.object("event")), nil
}

// NewICB implements Device.
func (r *Recorder) NewICB(commands int) (ICB, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	icb := ICB(r.object("icb"))
	r.icbs[icb] = make([]ICBCommand, commands)
	return icb, nil
}

// EncodeICB implements Device.
func (r *Recorder) EncodeICB(icb ICB, index int, c ICBCommand) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.Buffers = slices.Clone(c.Buffers)
	r.icbs[icb][index] = c
}

// Release implements Device.
func (r *Recorder) Release(object uintptr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.live, object)
	delete(r.hosts, Buffer(object))
}

// Close implements Device.
func (r *Recorder) Close() {}

// BeginWindow implements Commands.
func (r *Recorder) BeginWindow() error {
	r.mu.Lock()
	if r.inWindow {
		r.mu.Unlock()
		return errors.New("a window is already open")
	}
	r.inWindow, r.committed, r.executed, r.busy = true, false, 0, 0
	r.mu.Unlock()
	r.record(Op{Kind: OpBeginWindow})
	return nil
}

// BeginPass implements Commands.
func (r *Recorder) BeginPass() { r.record(Op{Kind: OpBeginPass}) }

// SetPipeline implements Commands.
func (r *Recorder) SetPipeline(p Pipeline) { r.record(Op{Kind: OpSetPipeline, Pipeline: p}) }

// SetBuffer implements Commands.
func (r *Recorder) SetBuffer(b Buffer, offset int64, slot int) {
	r.record(Op{Kind: OpSetBuffer, Buffer: b, Offset: offset, Slot: slot})
}

// SetBytes implements Commands.
func (r *Recorder) SetBytes(data []byte, slot int) {
	r.record(Op{Kind: OpSetBytes, Bytes: slices.Clone(data), Slot: slot})
}

// Dispatch implements Commands.
func (r *Recorder) Dispatch(grid, threadgroup [3]int) {
	r.record(Op{Kind: OpDispatch, Grid: grid, Threadgroup: threadgroup})
}

// MemoryBarrier implements Commands.
func (r *Recorder) MemoryBarrier() { r.record(Op{Kind: OpBarrier}) }

// UseResources implements Commands.
func (r *Recorder) UseResources(bufs []Buffer) {
	r.record(Op{Kind: OpUseResources, Buffers: slices.Clone(bufs)})
}

// ExecuteICB implements Commands.
func (r *Recorder) ExecuteICB(icb ICB, first, count int) {
	r.record(Op{Kind: OpExecuteICB, ICB: icb, First: first, Count: count})
}

// EndPass implements Commands.
func (r *Recorder) EndPass() { r.record(Op{Kind: OpEndPass}) }

// EncodeSignal implements Commands.
func (r *Recorder) EncodeSignal(e Event, value uint64) {
	r.record(Op{Kind: OpSignal, Event: e, Value: value})
}

// EncodeWait implements Commands.
func (r *Recorder) EncodeWait(e Event, value uint64) {
	r.record(Op{Kind: OpWait, Event: e, Value: value})
}

// Commit implements Commands: the simulated GPU starts on the window.
func (r *Recorder) Commit() {
	r.record(Op{Kind: OpCommit})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.end = len(r.ops)
	r.pc = r.end - 1
	for r.pc > 0 && r.ops[r.pc].Kind != OpBeginWindow {
		r.pc--
	}
	r.committed = true
	r.failNow, r.fail = r.fail, nil
}

// advance runs the simulated GPU as far as the events allow.
func (r *Recorder) advance() {
	if !r.committed {
		return
	}
	for ; r.pc < r.end && r.failNow == nil; r.pc++ {
		o := r.ops[r.pc]
		switch o.Kind {
		case OpSignal:
			r.events[o.Event] = max(r.events[o.Event], o.Value)
		case OpWait:
			if r.events[o.Event] < o.Value {
				return
			}
		case OpBeginPass:
			r.bound = encoderState{slots: map[int][]byte{}, errs: map[int]string{}}
		case OpSetPipeline:
			r.bound.pipeline = o.Pipeline
		case OpSetBuffer:
			r.bind(&r.bound, o.Slot, o.Buffer, o.Offset)
		case OpSetBytes:
			r.bound.slots[o.Slot], r.bound.errs[o.Slot] = o.Bytes, ""
		case OpDispatch:
			if o.Grid != [3]int{} {
				r.executed++
				r.launch(r.bound, o.Grid, o.Threadgroup)
			}
		case OpExecuteICB:
			for _, c := range r.icbs[o.ICB][o.First : o.First+o.Count] {
				st := encoderState{pipeline: c.Pipeline, slots: map[int][]byte{}, errs: map[int]string{}}
				for _, b := range c.Buffers {
					r.bind(&st, b.Slot, b.Buffer, b.Offset)
				}
				r.executed++
				r.launch(st, c.Grid, c.Threadgroup)
			}
		}
	}
}

// bind records a buffer binding in st (a pass's or an ICB command's).
func (r *Recorder) bind(st *encoderState, slot int, b Buffer, off int64) {
	host, ok := r.hosts[b]
	switch {
	case !ok:
		st.slots[slot], st.errs[slot] = nil, fmt.Sprintf("buffer %s has no host memory in the recording", r.labels[b])
	case off < 0 || off > int64(len(host)):
		st.slots[slot], st.errs[slot] = nil, fmt.Sprintf("offset %d past buffer %s of %d bytes", off, r.labels[b], len(host))
	default:
		st.slots[slot], st.errs[slot] = host[off:], ""
	}
}

// launch hands one dispatch to Execute.
func (r *Recorder) launch(st encoderState, grid, tg [3]int) {
	if r.Execute == nil {
		return
	}
	f, ok := r.functions[st.pipeline]
	if !ok {
		r.failNow = fmt.Errorf("dispatch %d with no pipeline set", r.executed)
		return
	}
	l := Launch{Function: f, Slots: map[int][]byte{}, Grid: grid, Threadgroup: tg}
	for slot, b := range st.slots {
		if why := st.errs[slot]; why != "" {
			r.failNow = fmt.Errorf("%s, slot %d: %s", f.Name, slot, why)
			return
		}
		l.Slots[slot] = b
	}
	start := time.Now()
	if err := r.Execute(l); err != nil {
		r.failNow = fmt.Errorf("%s: %w", f.Name, err)
	}
	r.busy += time.Since(start)
}

// SignaledValue implements Commands.
func (r *Recorder) SignaledValue(e Event) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advance()
	return r.events[e]
}

// SetSignaledValue implements Commands.
func (r *Recorder) SetSignaledValue(e Event, value uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events[e] = value
}

// Status implements Commands.
func (r *Recorder) Status() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.committed {
		return false, nil
	}
	if r.failNow != nil {
		return true, r.failNow
	}
	r.advance()
	if r.failNow != nil {
		return true, r.failNow
	}
	return r.pc >= r.end, nil
}

// GPUTime implements Commands: the time Execute took, or without it a
// microsecond per command run.
func (r *Recorder) GPUTime() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Execute != nil {
		return r.busy
	}
	return time.Duration(r.executed) * time.Microsecond
}

// EndWindow implements Commands.
func (r *Recorder) EndWindow() {
	r.record(Op{Kind: OpEndWindow})
	r.mu.Lock()
	r.inWindow, r.committed, r.failNow = false, false, nil
	r.mu.Unlock()
}
