package stream

import (
	"fmt"
	"sync"
	"time"
)

// Probe is a raw read-bandwidth measurement of a pack: whole experts read
// as the streamer reads a miss (parts of SplitBytes, Threads readers,
// page-aligned buffers, so O_DIRECT where the reader uses it), with nothing
// else running: the rate the disk gives expert reads, against which a
// streamed run's bytes per token set its limit.
type Probe struct {
	Experts int
	Bytes   int64
	Wall    time.Duration
}

// Rate is bytes per second.
func (p Probe) Rate() float64 { return float64(p.Bytes) / max(p.Wall.Seconds(), 1e-9) }

// ProbeReads reads n experts of slotBytes each from r, spread over layers ×
// experts by a fixed stride (the same experts every run), with opt's
// threads and part size.
func ProbeReads(r Reader, layers, experts, slotBytes, n int, opt Options) (Probe, error) {
	if layers < 1 || experts < 1 || slotBytes < 1 || n < 1 {
		return Probe{}, fmt.Errorf("probe of %d experts of %d bytes over %d layers × %d experts: nothing to read", n, slotBytes, layers, experts)
	}
	if opt.Threads <= 0 {
		opt.Threads = 8
	}
	part := opt.SplitBytes
	switch {
	case part == 0:
		part = 256 << 10
	case part < 0:
		part = slotBytes
	}
	part = (part + PageSize - 1) / PageSize * PageSize
	type job struct{ layer, expert, off, len int }
	var jobs []job
	total := layers * experts
	// A stride coprime to most sizes walks the experts without repeating.
	stride := 7919
	for i := range n {
		k := (i * stride) % total
		for off := 0; off < slotBytes; off += part {
			jobs = append(jobs, job{k / experts, k % experts, off, min(part, slotBytes-off)})
		}
	}
	next := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for range opt.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := pageAligned(part)
			for j := range next {
				if err := r.ReadExpert(j.layer, j.expert, j.off, buf[:j.len]); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	p := Probe{Experts: n, Bytes: int64(n) * int64(slotBytes), Wall: time.Since(start)}
	if firstErr != nil {
		return p, fmt.Errorf("probing reads: %w", firstErr)
	}
	return p, nil
}

// Probe reads n experts from the streamer's pack with its reader, threads
// and part size (ProbeReads); call it while no window runs.
func (s *Streamer) Probe(n int) (Probe, error) {
	return ProbeReads(s.r, s.a.Layers, s.a.Experts, s.a.SlotBytes, n, s.opt)
}
