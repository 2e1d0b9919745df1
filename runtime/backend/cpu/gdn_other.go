//go:build !amd64

package cpu

func gdnDecayDot(S, k, u []float32, dk, dv int, e float32) { gdnDecayDotGo(S, k, u, dk, dv, e) }

func gdnUpdateDot(S, k, delta, q, u []float32, dk, dv int) {
	gdnUpdateDotGo(S, k, delta, q, u, dk, dv)
}
