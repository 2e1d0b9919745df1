package cuda

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// A checked run (backend.CheckedProgram) stops the GPU only at the host
// points where a routed expert is missing. Right after each router, in
// place of the signal, a small kernel of the backend's own (part of the
// host-point protocol, like the signal and wait words; not model math)
// copies the router's ids and the read-ahead prediction into the point's
// page-locked words, checks every id against the layer's smap, and when
// all are resident writes the point's release word itself, so the wait
// that follows passes at once. The host reads what it needs from the
// words (never from GPU memory the next layer's router may overwrite), is
// called at every point in order, and may run behind the GPU.

// The words of a checked host point, after its signal and release.
const (
	wordChecked  = 2 // the window's sequence number once the check ran
	wordResident = 3 // 1: every routed expert was resident (the GPU ran on)
	wordCount    = 4 // live ids (rows × per row)
	wordIDs      = 8 // the ids, then each read of Rows × PerRow words
)

const hostCheckKernel = "strata_host_check"

// hostCheckSource is the check kernel; one block of 256 threads.
const hostCheckSource = `
extern "C" __global__ void strata_host_check(const unsigned* rowsWord, unsigned rows, unsigned perRow,
		const unsigned* ids, const unsigned* smap, unsigned entries, unsigned miss,
		const unsigned* pred, volatile unsigned* words, unsigned seq) {
	__shared__ int missing;
	unsigned live = rowsWord[0] < rows ? rowsWord[0] : rows;
	unsigned n = live * perRow;
	if (threadIdx.x == 0) missing = 0;
	__syncthreads();
	for (unsigned i = threadIdx.x; i < n; i += blockDim.x) {
		unsigned e = ids[i];
		words[8 + i] = e;
		if (e >= entries || smap[e] == miss) missing = 1;
		if (pred) words[8 + rows * perRow + i] = pred[i];
	}
	__threadfence_system();
	__syncthreads();
	if (threadIdx.x == 0) {
		words[3] = missing ? 0u : 1u;
		words[4] = n;
		__threadfence_system();
		words[2] = seq;
		if (!missing) words[1] = seq;
	}
}
`

// checkLaunch is one host point's check: its kernel arguments, seq last
// (set before each launch; the launch copies the arguments).
type checkLaunch struct {
	vals   [9]uintptr // rowsWord, rows, perRow, ids, smap, entries, miss, pred, words (32-bit values in the low half)
	seq    uint32
	params [10]unsafe.Pointer
}

// hostCheck compiles and loads the check kernel once (on the caller's
// goroutine; it takes the backend's thread to load).
func (b *Backend) hostCheck() (*pipeline, error) {
	b.mu.Lock()
	p, ok := b.pipes[hostCheckKernel]
	b.mu.Unlock()
	if ok {
		return p, nil
	}
	bin, _, err := b.nv.Compile([]byte(hostCheckSource), "host_check.cu", nil, compileOptions(b.info.Major, b.info.Minor))
	if err != nil {
		return nil, fmt.Errorf("cuda: the host-point check: %w", err)
	}
	p = &pipeline{key: hostCheckKernel}
	err = b.do(func() error {
		if err := b.d.check("cuModuleLoadData", b.d.moduleLoadData(&p.mod, &bin[0])); err != nil {
			return err
		}
		if err := b.d.check("cuModuleGetFunction", b.d.moduleGetFunction(&p.fn, p.mod, cstr(hostCheckKernel))); err != nil {
			return err
		}
		b.pipes[hostCheckKernel] = p
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: the host-point check: %w", err)
	}
	return p, nil
}

var _ backend.CheckedProgram = (*Program)(nil)

// RunChecked runs the window with the GPU checking each host point itself
// (backend.CheckedProgram). checks must be the same on every call.
func (p *Program) RunChecked(checks []backend.HostCheck, host func(graph.HostPoint, backend.HostSeen) error) error {
	if len(checks) != len(p.hosts) {
		return fmt.Errorf("cuda: %s window T=%d: %d host checks for %d host points", p.Graph.Kind, p.Graph.Rows, len(checks), len(p.hosts))
	}
	if len(p.hosts) == 0 {
		return p.run(nil, false)
	}
	if p.checks == nil {
		if err := p.prepareChecks(checks); err != nil {
			return fmt.Errorf("cuda: %s window T=%d: %w", p.Graph.Kind, p.Graph.Rows, err)
		}
	}
	return p.run(func(seq uint32) error { return p.serveChecked(checks, host, seq) }, true)
}

// prepareChecks sizes the host words for the checks and binds each
// point's check kernel.
func (p *Program) prepareChecks(checks []backend.HostCheck) error {
	fn, err := p.b.hostCheck()
	if err != nil {
		return err
	}
	stride := wordIDs
	for _, c := range checks {
		if len(c.Reads) > 1 {
			return fmt.Errorf("a host check of %d reads (the check copies at most one)", len(c.Reads))
		}
		if c.PerRow < 1 || c.Rows < 1 {
			return fmt.Errorf("a host check of %d rows × %d ids", c.Rows, c.PerRow)
		}
		stride = max(stride, wordIDs+c.Rows*c.PerRow*(1+len(c.Reads)))
	}
	stride = (stride + 31) &^ 31 // a 128-byte line per point at least
	rowsWord, err := p.mem.ptr(graph.ParamsBuffer, 4*graph.ParamRowsWord)
	if err != nil {
		return err
	}
	launches := make([]checkLaunch, len(checks))
	for k, c := range checks {
		l := &launches[k]
		ids, err := p.mem.ptr(c.IDs.Buffer, c.IDs.Offset)
		if err != nil {
			return fmt.Errorf("host check %d, ids: %w", k, err)
		}
		smap, err := p.mem.ptr(c.Smap.Buffer, c.Smap.Offset)
		if err != nil {
			return fmt.Errorf("host check %d, smap: %w", k, err)
		}
		var pred uintptr
		if len(c.Reads) == 1 {
			if pred, err = p.mem.ptr(c.Reads[0].Buffer, c.Reads[0].Offset); err != nil {
				return fmt.Errorf("host check %d, read: %w", k, err)
			}
		}
		l.vals = [9]uintptr{rowsWord, uintptr(c.Rows), uintptr(c.PerRow), ids, smap, uintptr(c.Smap.Size / 4), uintptr(c.Miss), pred, 0}
	}
	err = p.b.do(func() error {
		if err := p.allocFlags(stride); err != nil {
			return err
		}
		for k := range launches {
			l := &launches[k]
			l.vals[8] = p.flagsDV + uintptr(4*stride*k)
			for j := range l.vals {
				l.params[j] = unsafe.Pointer(&l.vals[j])
			}
			l.params[9] = unsafe.Pointer(&l.seq)
		}
		return nil
	})
	if err != nil {
		return err
	}
	p.checks, p.checkFn = launches, fn.fn
	return nil
}

// launchCheck queues host point k's check on the main stream (on the
// backend's thread).
func (p *Program) launchCheck(k int, seq uint32) error {
	l := &p.checks[k]
	l.seq = seq
	if r := p.b.d.launchKernel(p.checkFn, 1, 1, 1, 256, 1, 1, 0, p.main, &l.params[0], nil); r != 0 {
		return fmt.Errorf("host check %d (layer %d): %w", k, p.hosts[k].Layer, p.b.d.check("cuLaunchKernel", r))
	}
	return nil
}

// serveChecked answers a checked window's host points in order: it waits
// for each point's check, hands the host copies of what the GPU wrote, and
// releases the point (a resident one the GPU released already).
func (p *Program) serveChecked(checks []backend.HostCheck, host func(graph.HostPoint, backend.HostSeen) error, seq uint32) error {
	var first error
	for k, h := range p.hosts {
		w := p.flags[p.stride*k : p.stride*(k+1)]
		if err := p.spin(&w[wordChecked], seq); err != nil {
			p.releaseAll(seq)
			return fmt.Errorf("host point of layer %d: %w", h.Layer, err)
		}
		if first == nil {
			span := checks[k].Rows * checks[k].PerRow
			n := min(int(w[wordCount]), span)
			seen := backend.HostSeen{IDs: append([]uint32(nil), w[wordIDs:wordIDs+n]...), Resident: w[wordResident] == 1}
			for r := range checks[k].Reads {
				at := wordIDs + (1+r)*span
				seen.Reads = append(seen.Reads, append([]uint32(nil), w[at:at+n]...))
			}
			if err := host(h, seen); err != nil {
				first = fmt.Errorf("host point of layer %d: %w", h.Layer, err)
			}
		}
		atomic.StoreUint32(&w[1], seq)
	}
	return first
}
