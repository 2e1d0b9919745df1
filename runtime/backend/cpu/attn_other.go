//go:build !amd64

package cpu

func attnQK(q []float64, qs int, k []float32, ks int, out []float64, os, nq, n, hd int) {
	attnQKGo(q, qs, k, ks, out, os, nq, n, hd)
}

func attnPV(acc []float64, as int, v []float32, vs int, w []float64, ws, nq, n, hd int) {
	attnPVGo(acc, as, v, vs, w, ws, nq, n, hd)
}
