package imatrix

import (
	"strings"
	"testing"
)

// Two collected tensors that are rows of one GGUF tensor (the same input:
// qwen3next's ssm_ba run as the GDN's b and a) give one entry; two with
// different statistics under one name are refused.
func TestMatrixSharedTarget(t *testing.T) {
	c := NewCollector()
	x := []float32{1, 2, 3, 4, -1, 0}
	c.Activations("layers.0.gdn.b", 0, 1, 3, x)
	c.Activations("layers.0.gdn.a", 0, 1, 3, x)
	to := func(string) []Target { return []Target{{Name: "blk.0.ssm_ba.weight"}} }
	m, err := c.Matrix(to)
	if err != nil {
		t.Fatal(err)
	}
	e := m.Entries["blk.0.ssm_ba.weight"]
	if len(m.Entries) != 1 || e == nil || e.Counts[0] != 2 || e.Sums[0] != 17 || e.Sums[1] != 5 || e.Sums[2] != 9 {
		t.Fatalf("entries %v, ssm_ba %+v; want one entry, 2 rows, Σx² 17, 5, 9", m.Names(), e)
	}
	c.Activations("layers.0.gdn.a", 0, 1, 3, x[:3])
	if _, err := c.Matrix(to); err == nil || !strings.Contains(err.Error(), "different statistics map to blk.0.ssm_ba.weight") {
		t.Fatalf("different statistics under one name: %v", err)
	}
}
