//go:build !amd64

package quant

// archDots: no vectorized kernels on this architecture yet (arm64 NEON is
// still to be written); every format runs its reference Dot.
func archDots() map[string]dot32Func { return nil }

func archDots4() map[string]dot4Func { return nil }
