package metal

import (
	"fmt"
	"time"
)

// keepAlivePeriod is how often an idle backend commits a keep-alive buffer.
const keepAlivePeriod = time.Millisecond

// keepAliveSource is a kernel with just enough work to keep the GPU from
// clocking down between windows.
const keepAliveSource = `#include <metal_stdlib>
using namespace metal;

kernel void strata_keepalive(device atomic_uint *n [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    if (i == 0) {
        atomic_fetch_add_explicit(n, 1u, memory_order_relaxed);
    }
}
`

const keepAliveFunction = "strata_keepalive"

// keepAlive commits a tiny command buffer every keepAlivePeriod while the
// backend is idle, for Options.KeepAlive after each window. Its command
// buffers go through the same Commands as windows, one at a time; a window
// first waits for the one in flight (a single dispatch of one thread).
type keepAlive struct {
	on       bool
	lib      Library
	pipe     Pipeline
	buf      Buffer
	until    time.Time
	inFlight bool
	ticks    int
}

func (k *keepAlive) init(b *Backend) error {
	lib, _, err := b.dev.NewLibrary(keepAliveSource, DefaultLanguageVersion)
	if err != nil {
		return err
	}
	k.lib = lib
	if k.pipe, _, err = b.dev.NewPipeline(lib, Function{Name: keepAliveFunction}, false); err != nil {
		return err
	}
	if k.buf, _, err = b.dev.NewBuffer("keepalive", 16); err != nil {
		return err
	}
	k.on = true
	return nil
}

// extend starts the keep-alive interval after a window.
func (k *keepAlive) extend(b *Backend) {
	if k.on {
		k.until = time.Now().Add(b.opt.KeepAlive)
	}
}

func (k *keepAlive) wanted() bool { return k.on && time.Now().Before(k.until) }

// tick commits one keep-alive buffer unless one is still running; it
// reports false once the interval is over and nothing is in flight.
func (k *keepAlive) tick(b *Backend) bool {
	dev := b.dev
	if k.inFlight {
		if done, _ := dev.Status(); !done {
			return true
		}
		dev.EndWindow()
		k.inFlight = false
	}
	if !k.wanted() || b.broken != nil {
		return false
	}
	if err := dev.BeginWindow(); err != nil {
		return false
	}
	dev.BeginPass()
	dev.SetPipeline(k.pipe)
	dev.SetBuffer(k.buf, 0, 0)
	dev.Dispatch([3]int{1, 1, 1}, [3]int{1, 1, 1})
	dev.EndPass()
	dev.Commit()
	k.inFlight = true
	k.ticks++
	return true
}

// finish waits for the keep-alive buffer in flight, before a window.
func (k *keepAlive) finish(b *Backend) error {
	if !k.inFlight {
		return nil
	}
	deadline := time.Now().Add(b.opt.HostTimeout)
	for n := 0; ; n++ {
		if done, _ := b.dev.Status(); done {
			break
		}
		if n&1023 == 1023 && time.Now().After(deadline) {
			return fmt.Errorf("metal: a keep-alive command buffer did not finish in %v", b.opt.HostTimeout)
		}
	}
	b.dev.EndWindow()
	k.inFlight = false
	return nil
}

func (k *keepAlive) release(b *Backend) {
	_ = k.finish(b)
	for _, h := range []uintptr{uintptr(k.buf), uintptr(k.pipe), uintptr(k.lib)} {
		if h != 0 {
			b.dev.Release(h)
		}
	}
	*k = keepAlive{}
}
