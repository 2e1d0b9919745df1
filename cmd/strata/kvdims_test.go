package main

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/format/safetensors"
)

// A Qwen3-Next checkpoint whose Gated DeltaNet value heads are narrower than
// its key heads (linear_key_head_dim 16, linear_value_head_dim 8). No HF
// reference exists for it here, so this checks two things that do not come
// from the code under test: the GGUF's metadata and tensor shapes against
// llama.cpp's qwen3next reading, derived by hand below (head_k_dim =
// ssm.state_size, num_k_heads = ssm.group_count, num_v_heads =
// ssm.time_step_rank, head_v_dim = ssm.inner_size / ssm.time_step_rank), and
// that the GGUF path decodes what the safetensors path of the same
// checkpoint decodes, logits bit for bit (a passthrough conversion).
func TestConvertKeyValueHeadDimsDiffer(t *testing.T) {
	const nk, dk, nv, dv, hidden = 2, 16, 4, 8, 64
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(name string, shape []int, around float64) safetensors.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		b := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(around+0.1*rng.NormFloat64())))
		}
		return safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: b}
	}
	ck := copyCheckpoint(t, func(s string) string {
		return strings.Replace(s, `"linear_value_head_dim": 16`, `"linear_value_head_dim": 8`, 1)
	}, func(ts []safetensors.Tensor) []safetensors.Tensor {
		for i, x := range ts {
			switch {
			case strings.HasSuffix(x.Name, "linear_attn.in_proj_qkvz.weight"):
				ts[i] = random(x.Name, []int{2*nk*dk + 2*nv*dv, hidden}, 0)
			case strings.HasSuffix(x.Name, "linear_attn.conv1d.weight"):
				ts[i] = random(x.Name, []int{2*nk*dk + nv*dv, 1, 4}, 0)
			case strings.HasSuffix(x.Name, "linear_attn.norm.weight"):
				ts[i] = random(x.Name, []int{dv}, 1)
			case strings.HasSuffix(x.Name, "linear_attn.out_proj.weight"):
				ts[i] = random(x.Name, []int{hidden, nv * dv}, 0)
			}
		}
		return ts
	})
	dir := t.TempDir()
	out := filepath.Join(dir, "kv.gguf")
	if _, stderr, status := runStrata(t, "convert", "--hf", ck, "-o", out); status != 0 {
		t.Fatalf("convert: status %d: %s", status, stderr)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]uint64{"ssm.state_size": dk, "ssm.group_count": nk, "ssm.time_step_rank": nv, "ssm.inner_size": nv * dv} {
		if got, err := f.Uint("qwen3next." + key); err != nil || got != want {
			t.Errorf("qwen3next.%s = %d (%v), want %d", key, got, err, want)
		}
	}
	// ggml dims: columns first.
	for name, want := range map[string][]uint64{
		"blk.0.attn_qkv.weight":   {hidden, 2*nk*dk + nv*dv}, // q | k | v
		"blk.0.attn_gate.weight":  {hidden, nv * dv},         // z
		"blk.0.ssm_conv1d.weight": {4, 2*nk*dk + nv*dv},
		"blk.0.ssm_norm.weight":   {dv},
		"blk.0.ssm_out.weight":    {nv * dv, hidden},
		"blk.0.ssm_a":             {nv},
	} {
		x, ok := f.Tensor(name)
		if !ok || !slices.Equal(x.Dims, want) {
			t.Errorf("%s: dims %v (found %v), want %v", name, x.Dims, ok, want)
		}
	}
	f.Close()

	tokens := "5,17,300,2,44,44,9"
	hfLogits, ggufLogits := filepath.Join(dir, "hf.safetensors"), filepath.Join(dir, "gguf.safetensors")
	hfOut, stderr, status := runStrata(t, "run", "--hf", ck, "--tokens", tokens, "-n", "6", "--dump-logits", hfLogits)
	if status != 0 {
		t.Fatalf("run --hf: status %d: %s", status, stderr)
	}
	ggOut, stderr, status := runStrata(t, "run", "--gguf", out, "--tokens", tokens, "-n", "6", "--dump-logits", ggufLogits)
	if status != 0 {
		t.Fatalf("run --gguf: status %d: %s", status, stderr)
	}
	if hfOut != ggOut {
		t.Errorf("greedy tokens: GGUF %q, safetensors %q", ggOut, hfOut)
	}
	a, b := readLogits(t, hfLogits), readLogits(t, ggufLogits)
	if !slices.Equal(a, b) {
		t.Errorf("logits of the GGUF path differ from the safetensors path's")
	}
}

func readLogits(t *testing.T, path string) []float32 {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	x, _ := f.Tensor("logits")
	v, err := x.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return v
}
