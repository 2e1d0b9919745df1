//go:build !amd64

package cpu

func attnDots(q []float64, k []float32, out []float64, stride int) { attnDotsGo(q, k, out, stride) }

func attnAxpy(acc []float64, v []float32, w float64) { attnAxpyGo(acc, v, w) }
