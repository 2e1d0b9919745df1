package cpu

// attnDots sets out[j] = Σ_i q[i]·k[j·stride+i] for j < len(out), in float64.
func attnDots(q []float64, k []float32, out []float64, stride int) {
	hd, n := len(q), len(out)
	if !gdnAVX2 || hd%8 != 0 || hd == 0 || n == 0 {
		attnDotsGo(q, k, out, stride)
		return
	}
	_ = k[(n-1)*stride+hd-1]
	attnDotsAVX2(&q[0], &k[0], &out[0], n, stride, hd)
}

// attnAxpy adds w·v to acc, in float64.
func attnAxpy(acc []float64, v []float32, w float64) {
	hd := len(acc)
	if !gdnAVX2 || hd%4 != 0 || hd == 0 {
		attnAxpyGo(acc, v, w)
		return
	}
	_ = v[hd-1]
	attnAxpyAVX2(&acc[0], &v[0], w, hd)
}
