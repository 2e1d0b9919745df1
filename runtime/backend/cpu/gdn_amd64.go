package cpu

import "golang.org/x/sys/cpu"

var gdnAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

func gdnDecayDot(S, k, u []float32, dk, dv int, e float32) {
	if !gdnAVX2 || dv%8 != 0 || dk == 0 {
		gdnDecayDotGo(S, k, u, dk, dv, e)
		return
	}
	_, _, _ = S[dk*dv-1], k[dk-1], u[dv-1]
	gdnDecayDotAVX2(&S[0], &k[0], &u[0], dk, dv, e)
}

func gdnUpdateDot(S, k, delta, q, u []float32, dk, dv int) {
	if !gdnAVX2 || dv%8 != 0 || dk == 0 {
		gdnUpdateDotGo(S, k, delta, q, u, dk, dv)
		return
	}
	_, _, _, _, _ = S[dk*dv-1], k[dk-1], q[dk-1], delta[dv-1], u[dv-1]
	gdnUpdateDotAVX2(&S[0], &k[0], &delta[0], &q[0], &u[0], dk, dv)
}
