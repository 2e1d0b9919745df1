package backend

// HostMemory is the host side of a model's memory, one type for every
// backend: the named buffers of its window graphs as byte slices the engine
// reads and writes, and typed views of them. The cpu backend keeps the bytes
// in Go's heap (NewHostMemory); mslemu, metal and cuda allocate them where
// their kernels reach them (mapped memory, MTLBuffers over shared pages,
// device or pinned memory) and wrap them (WrapHostMemory) with only their
// device's side: the mappings, handles or device addresses behind each buffer.

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/strata-llm/strata/graph"
)

// HostMemory backs the named buffers of a model's window graphs (Layout says
// which, how large). It implements Memory and MappedMemory.
type HostMemory struct {
	layout []graph.Buffer
	// host[i] holds layout[i].Size bytes, or is nil where there is no host
	// memory: a mapped buffer before Wrap, a buffer a device keeps to itself.
	host    [][]byte
	index   map[string]int
	dropped bool
}

// Layout is every buffer the graphs declare, in declaration order, each at
// the largest size any graph asks: the window shapes of one model run one at
// a time, so they share scratch and params, while weights, experts, state,
// caches and mapped buffers (fixedLayout) must have one size in every graph.
// A buffer of two kinds is refused too.
func Layout(graphs ...*graph.Graph) ([]graph.Buffer, error) {
	var layout []graph.Buffer
	index := map[string]int{}
	for _, g := range graphs {
		for _, b := range g.Buffers {
			i, ok := index[b.Name]
			if !ok {
				index[b.Name] = len(layout)
				layout = append(layout, graph.Buffer{Name: b.Name, Kind: b.Kind, Size: b.Size})
				continue
			}
			l := &layout[i]
			if l.Kind != b.Kind {
				return nil, fmt.Errorf("buffer %s is %s in one graph and %s in another", b.Name, l.Kind, b.Kind)
			}
			if fixedLayout(b.Kind) && l.Size != b.Size {
				return nil, fmt.Errorf("%s buffer %s has %d bytes in one window graph and %d in another: the shapes do not share a layout", b.Kind, b.Name, l.Size, b.Size)
			}
			l.Size = max(l.Size, b.Size)
		}
	}
	return layout, nil
}

// fixedLayout: buffers whose contents outlive a window (or lie in a file),
// so every shape must address them alike.
func fixedLayout(kind string) bool {
	switch kind {
	case graph.KindWeights, graph.KindExperts, graph.KindState, graph.KindCache, graph.KindMapped:
		return true
	}
	return false
}

// Align is the alignment the start of a buffer of kind must have: a page of
// graph.ExpertPage bytes for the experts (the streaming arena's O_DIRECT
// reads land there, and smap addresses experts in such pages), 8 bytes for
// every other buffer (float32, uint32 and uint64 views).
func Align(kind string) int {
	if kind == graph.KindExperts {
		return graph.ExpertPage
	}
	return 8
}

// New is a Memory over host bytes a backend allocated: host[i] holds exactly
// layout[i].Size zeroed bytes starting on Align(layout[i].Kind), or is nil
// where the backend keeps no host view (and must be nil for a mapped
// buffer, which Wrap backs later). The backend keeps the bytes valid until
// it calls Drop.
func WrapHostMemory(layout []graph.Buffer, host [][]byte) (*HostMemory, error) {
	if len(host) != len(layout) {
		return nil, fmt.Errorf("buffers: %d host slices for %d buffers", len(host), len(layout))
	}
	m := &HostMemory{layout: layout, host: host, index: make(map[string]int, len(layout))}
	for i, b := range layout {
		if _, dup := m.index[b.Name]; dup {
			return nil, fmt.Errorf("buffers: buffer %s is laid out twice", b.Name)
		}
		m.index[b.Name] = i
		if host[i] == nil {
			continue
		}
		if b.Kind == graph.KindMapped {
			return nil, fmt.Errorf("buffers: mapped buffer %s is backed before Wrap", b.Name)
		}
		if err := checkHost(b, host[i]); err != nil {
			return nil, fmt.Errorf("buffers: %w", err)
		}
	}
	return m, nil
}

// checkHost: host is exactly b's bytes, from an aligned start.
func checkHost(b graph.Buffer, host []byte) error {
	if int64(len(host)) != b.Size {
		return fmt.Errorf("buffer %s: %d bytes of host memory for a %d-byte buffer", b.Name, len(host), b.Size)
	}
	if len(host) > 0 {
		if at := uintptr(unsafe.Pointer(unsafe.SliceData(host))); at%uintptr(Align(b.Kind)) != 0 {
			return fmt.Errorf("%s buffer %s starts at %#x, not on a %d-byte boundary", b.Kind, b.Name, at, Align(b.Kind))
		}
	}
	return nil
}

// NewMemory is the cpu backend's Memory: every buffer any of the graphs
// declares (Layout) in Go's heap, zeroed and aligned (Align); mapped
// buffers wait for Wrap.
func NewHostMemory(graphs ...*graph.Graph) (*HostMemory, error) {
	layout, err := Layout(graphs...)
	if err != nil {
		return nil, err
	}
	host := make([][]byte, len(layout))
	for i, b := range layout {
		if b.Kind != graph.KindMapped {
			host[i] = AlignedBytes(b.Size, Align(b.Kind))
		}
	}
	return WrapHostMemory(layout, host)
}

// AlignedBytes returns n zeroed bytes whose start is a multiple of align (a
// power of two ≥ 8). They are backed by uint64s, so float32 and uint32 views
// of any 4-aligned offset are valid.
func AlignedBytes(n int64, align int) []byte {
	if n == 0 {
		return []byte{}
	}
	if align < 8 || align&(align-1) != 0 {
		panic(fmt.Sprintf("buffers: alignment %d is not a power of two ≥ 8", align))
	}
	words := make([]uint64, (n+int64(align)+7)/8)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	skip := int(-uintptr(unsafe.Pointer(&words[0])) & uintptr(align-1))
	return b[skip : int64(skip)+n : int64(skip)+n]
}

// Layout is the buffers, in the order of New's host slices. The caller must
// not change it.
func (m *HostMemory) Layout() []graph.Buffer { return m.layout }

// Index is the position of buffer name in Layout.
func (m *HostMemory) Index(name string) (int, bool) {
	i, ok := m.index[name]
	return i, ok
}

// Host is the host bytes of buffer i of Layout (nil: none).
func (m *HostMemory) Host(i int) []byte { return m.host[i] }

// Locate checks that range r lies inside its buffer and returns the
// buffer's position in Layout: what a backend binding r to a kernel checks.
// The empty range at offset 0 is the whole buffer (a binding of a buffer
// sized at run time: the expert arena).
func (m *HostMemory) Locate(r graph.Range) (int, error) {
	i, ok := m.index[r.Buffer]
	if !ok {
		return 0, fmt.Errorf("no buffer %q", r.Buffer)
	}
	if r.Size == 0 && r.Offset == 0 {
		return i, nil
	}
	if size := m.layout[i].Size; r.Offset < 0 || r.Size < 0 || r.End() > size {
		return 0, fmt.Errorf("range [%d,%d) outside buffer %q of %d bytes", r.Offset, r.End(), r.Buffer, size)
	}
	return i, nil
}

// Bytes returns the bytes of a range (Locate), with capacity clipped to the
// range so a kernel cannot write past what its binding declares.
func (m *HostMemory) Bytes(r graph.Range) ([]byte, error) {
	i, err := m.Locate(r)
	if err != nil {
		return nil, err
	}
	b := m.host[i]
	if b == nil && m.layout[i].Size > 0 {
		return nil, fmt.Errorf("%s buffer %q has no host memory (not wrapped, or the device keeps it)", m.layout[i].Kind, r.Buffer)
	}
	if r.Size == 0 && r.Offset == 0 {
		return b, nil
	}
	return b[r.Offset:r.End():r.End()], nil
}

// Buffer returns a whole buffer (nil for one no graph declares, or without
// host memory).
func (m *HostMemory) Buffer(name string) []byte {
	if i, ok := m.index[name]; ok {
		return m.host[i]
	}
	return nil
}

// Wrap backs a graph.KindMapped buffer with host memory the caller owns and
// keeps alive (a stretch of a mapped model file), used in place: at least
// the buffer's size, from an 8-byte aligned start.
func (m *HostMemory) Wrap(name string, host []byte) error { return m.WrapWith(name, host, nil) }

// WrapWith is Wrap for a backend that must also hand host to its device:
// bind runs after Wrap's own checks and before the buffer changes, and an
// error from it leaves the buffer as it was.
func (m *HostMemory) WrapWith(name string, host []byte, bind func(i int, host []byte) error) error {
	i, ok := m.index[name]
	if !ok {
		return fmt.Errorf("no buffer %q to wrap", name)
	}
	b := m.layout[i]
	if b.Kind != graph.KindMapped {
		return fmt.Errorf("buffer %s is %s, not %s: only mapped buffers are wrapped", name, b.Kind, graph.KindMapped)
	}
	if int64(len(host)) < b.Size {
		return fmt.Errorf("buffer %s: %d bytes of host memory for a %d-byte buffer", name, len(host), b.Size)
	}
	if err := checkHost(b, host[:b.Size]); err != nil {
		return err
	}
	if bind != nil {
		if err := bind(i, host); err != nil {
			return err
		}
	}
	m.host[i] = host[:b.Size:b.Size]
	return nil
}

// Clear zeroes every buffer of a kind (graph.KindState: a new sequence).
func (m *HostMemory) Clear(kind string) {
	for i, b := range m.layout {
		if b.Kind == kind {
			clear(m.host[i])
		}
	}
}

// Snapshot copies every buffer of a kind into dst (reused when large
// enough) and returns it; Restore puts such a copy back. Speculative decoding
// snapshots the rolling state before a verify window and restores it when
// drafts are rejected.
func (m *HostMemory) Snapshot(kind string, dst map[string][]byte) map[string][]byte {
	if dst == nil {
		dst = map[string][]byte{}
	}
	for i, b := range m.layout {
		if b.Kind == kind {
			dst[b.Name] = append(dst[b.Name][:0], m.host[i]...)
		}
	}
	return dst
}

// Restore copies a snapshot back.
func (m *HostMemory) Restore(snap map[string][]byte) {
	for name, b := range snap {
		copy(m.Buffer(name), b)
	}
}

// Fork is a HostMemory with base's layout whose buffers of the given kinds
// are alloc's (b.Size zeroed bytes on Align(b.Kind), or an error), every
// other buffer base's own bytes: what a backend's Forker builds on.
func (m *HostMemory) Fork(kinds []string, alloc func(b graph.Buffer) ([]byte, error)) (*HostMemory, error) {
	if m.dropped {
		return nil, fmt.Errorf("buffers: fork of a memory whose backend has freed it")
	}
	host := make([][]byte, len(m.layout))
	for i, b := range m.layout {
		host[i] = m.host[i]
		if !slices.Contains(kinds, b.Kind) {
			continue
		}
		if b.Kind == graph.KindMapped {
			return nil, fmt.Errorf("buffers: mapped buffer %s cannot be forked: it lies in the model file", b.Name)
		}
		h, err := alloc(b)
		if err != nil {
			return nil, fmt.Errorf("buffers: forking %s buffer %s: %w", b.Kind, b.Name, err)
		}
		if err := checkHost(b, h); err != nil {
			return nil, fmt.Errorf("buffers: forking: %w", err)
		}
		host[i] = h
	}
	f := &HostMemory{layout: m.layout, host: host, index: m.index}
	return f, nil
}

// Drop forgets every buffer, once the backend has freed their bytes: later
// reads find no buffer instead of freed memory.
func (m *HostMemory) Drop() {
	m.host = make([][]byte, len(m.layout))
	m.index = map[string]int{}
	m.dropped = true
}

// Dropped reports whether Drop was called.
func (m *HostMemory) Dropped() bool { return m.dropped }

// Float32s views bytes as float32s (the length must be a multiple of 4 and the
// start 4-aligned, which every region of a window graph is).
func Float32s(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// Uint32s views bytes as uint32s.
func Uint32s(b []byte) []uint32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4)
}
