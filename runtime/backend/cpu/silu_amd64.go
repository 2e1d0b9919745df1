package cpu

// avx2Len is how many of n elements the four-lane AVX2 kernels below take:
// n rounded down to a multiple of four, none without AVX2. The Go
// references take the rest.
func avx2Len(n int) int {
	if !gdnAVX2 {
		return 0
	}
	return n / 4 * 4
}

// siluMul sets h[i] = float32(silu(g[i])·u[i]) for i < len(h), in float64:
// the MLPs' activation.
func siluMul(h, g, u []float32) {
	n := len(h)
	_, _ = g[:n], u[:n]
	v := avx2Len(n)
	if v > 0 {
		siluMulAVX2(&h[0], &g[0], &u[0], v)
	}
	siluMulGo(h[v:], g[v:n], u[v:n])
}

// siluRow sets x[i] = float32(silu(x[i])), in float64.
func siluRow(x []float32) {
	v := avx2Len(len(x))
	if v > 0 {
		siluAVX2(&x[0], &x[0], v)
	}
	siluRowGo(x[v:])
}

// expShift sets x[i] = e^(x[i]−m) (a softmax's numerators, m the maximum).
func expShift(x []float64, m float64) {
	v := avx2Len(len(x))
	if v > 0 {
		expShiftAVX2(&x[0], v, m)
	}
	expShiftGo(x[v:], m)
}
