//go:build !amd64

package quant

// archAct8: no integer kernels on this architecture (arm64 NEON's SDOT
// versions are not written); rows take the float32 path.
func archAct8() map[string]act8Func { return nil }

func archAct8x4() map[string]act8x4Func { return nil }

func archAct8Rows() map[string]act8RowsFunc { return nil }

func archAct8x8() map[string]act8x8Func { return nil }

func archAct8x2() map[string]act8x2Func { return nil }

func archAct8Wide() map[string]wideKernels { return nil }
