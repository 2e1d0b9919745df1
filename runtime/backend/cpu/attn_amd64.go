package cpu

// attnQK sets out[r·os+j] = q_r·k_j for r < nq, j < n, where q_r =
// q[r·qs:][:hd] and k_j = k[j·ks:][:hd], in float64 with attnQKGo's order
// of additions: three queries by four keys a kernel call.
func attnQK(q []float64, qs int, k []float32, ks int, out []float64, os, nq, n, hd int) {
	if nq == 0 || n == 0 {
		return
	}
	if !gdnAVX2 || hd%4 != 0 || hd == 0 {
		attnQKGo(q, qs, k, ks, out, os, nq, n, hd)
		return
	}
	_, _, _ = q[(nq-1)*qs+hd-1], k[(n-1)*ks+hd-1], out[(nq-1)*os+n-1]
	for r := 0; r < nq; r += 3 {
		switch min(3, nq-r) {
		case 3:
			attnQK3AVX2(&q[r*qs], qs, &k[0], ks, &out[r*os], os, n, hd)
		case 2:
			attnQK2AVX2(&q[r*qs], qs, &k[0], ks, &out[r*os], os, n, hd)
		default:
			attnQK1AVX2(&q[r*qs], qs, &k[0], ks, &out[r*os], os, n, hd)
		}
	}
}

// attnPV adds w[r·ws+j]·v_j to acc[r·as:][:hd] for r < nq and the keys
// j < n in order (v_j = v[j·vs:][:hd]), in float64 with attnPVGo's
// additions: three queries a kernel call.
func attnPV(acc []float64, as int, v []float32, vs int, w []float64, ws, nq, n, hd int) {
	if nq == 0 || n == 0 {
		return
	}
	if !gdnAVX2 || hd%4 != 0 || hd == 0 {
		attnPVGo(acc, as, v, vs, w, ws, nq, n, hd)
		return
	}
	_, _, _ = acc[(nq-1)*as+hd-1], v[(n-1)*vs+hd-1], w[(nq-1)*ws+n-1]
	for r := 0; r < nq; r += 3 {
		switch min(3, nq-r) {
		case 3:
			attnPV3AVX2(&acc[r*as], as, &v[0], vs, &w[r*ws], ws, n, hd)
		case 2:
			attnPV2AVX2(&acc[r*as], as, &v[0], vs, &w[r*ws], ws, n, hd)
		default:
			attnPV1AVX2(&acc[r*as], as, &v[0], vs, &w[r*ws], ws, n, hd)
		}
	}
}
