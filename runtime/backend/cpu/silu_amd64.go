package cpu

// siluMul sets h[i] = float32(silu(g[i])·u[i]) for i < len(h), in float64:
// the MLPs' activation, on AVX2 four at a time where the CPU has it.
func siluMul(h, g, u []float32) {
	n := len(h)
	_, _ = g[:n], u[:n]
	v := 0
	if gdnAVX2 {
		v = n / 4 * 4
		if v > 0 {
			siluMulAVX2(&h[0], &g[0], &u[0], v)
		}
	}
	siluMulGo(h[v:], g[v:n], u[v:n])
}

// siluRow sets x[i] = float32(silu(x[i])), in float64.
func siluRow(x []float32) {
	v := 0
	if gdnAVX2 {
		v = len(x) / 4 * 4
		if v > 0 {
			siluAVX2(&x[0], &x[0], v)
		}
	}
	siluRowGo(x[v:])
}

// expShift sets x[i] = e^(x[i]−m) (a softmax's numerators, m the maximum).
func expShift(x []float64, m float64) {
	v := 0
	if gdnAVX2 {
		v = len(x) / 4 * 4
		if v > 0 {
			expShiftAVX2(&x[0], v, m)
		}
	}
	expShiftGo(x[v:], m)
}
