//go:build !amd64

package cpu

func siluMul(h, g, u []float32) { siluMulGo(h, g, u) }

func siluRow(x []float32) { siluRowGo(x) }

func expShift(x []float64, m float64) { expShiftGo(x, m) }
