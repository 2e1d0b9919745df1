package weights

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/format/safetensors"
)

// tinyA is testdata/oracles/tiny-a/config.json written out by hand, so this
// test does not depend on the model.toml loader.
func tinyA() *models.Config {
	return &models.Config{
		Name: "tiny-a",
		Architecture: models.Architecture{
			ModelType:  models.TypeQwen3Next,
			HiddenSize: 64,
			NumLayers:  4,
			LayerTypes: []string{models.LayerLinearAttention, models.LayerLinearAttention, models.LayerLinearAttention, models.LayerFullAttention},
			VocabSize:  512,
			RMSNormEps: 1e-6,
			HiddenAct:  "silu",
			Attention: models.Attention{
				NumHeads: 4, NumKVHeads: 2, HeadDim: 32, RopeTheta: 1e4,
				PartialRotaryFactor: 0.25, OutputGate: true, MaxPositions: 4096,
			},
			LinearAttention: models.LinearAttention{NumKeyHeads: 2, NumValueHeads: 4, KeyHeadDim: 16, ValueHeadDim: 16, ConvKernel: 4},
			MoE: models.MoE{
				NumExperts: 16, ExpertsPerToken: 4, IntermediateSize: 32, SharedExpertIntermediateSize: 32,
				NormTopKProb: true, DecoderSparseStep: 1, DenseIntermediateSize: 128,
			},
		},
		Quant: models.QuantPlan{Trunk: "f32", Experts: "f32", Embeddings: "f32", Head: "f32"},
	}
}

func spec(t *testing.T, cfg *models.Config, name string) models.TensorSpec {
	t.Helper()
	for _, s := range cfg.Tensors() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("config has no role %s", name)
	return models.TensorSpec{}
}

func openTinyA(t *testing.T) (*safetensors.Checkpoint, *HF) {
	t.Helper()
	ck, err := safetensors.OpenDir("../../testdata/oracles/tiny-a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck, NewHF(ck, tinyA())
}

func hfFloats(t *testing.T, ck *safetensors.Checkpoint, name string) []float32 {
	t.Helper()
	tt, ok := ck.Tensor(name)
	if !ok {
		t.Fatalf("checkpoint has no %s", name)
	}
	v, err := tt.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func decode(t *testing.T, format string, b []byte) []float32 {
	t.Helper()
	f, err := quant.Lookup(format)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/f.BlockBytes*f.BlockElems)
	f.Decode(b, out)
	return out
}

func read(t *testing.T, h *HF, s models.TensorSpec, index int, format string) []byte {
	t.Helper()
	f, _ := quant.Lookup(format)
	n := s.Elements()
	if index >= 0 {
		n /= s.Shape[0]
	}
	dst := make([]byte, f.Bytes(n))
	if err := h.Read(s, index, format, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestTinyACheckAndDirect(t *testing.T) {
	ck, h := openTinyA(t)
	cfg := tinyA()
	if err := h.Check(cfg.Tensors()); err != nil {
		t.Fatal(err)
	}
	// Every f32 source read as f32 is a byte copy of the checkpoint tensor.
	direct := map[string]string{
		"embed":                    "model.embed_tokens.weight",
		"head":                     "lm_head.weight",
		"final_norm":               "model.norm.weight",
		"layers.0.gdn.qkvz":        "model.layers.0.linear_attn.in_proj_qkvz.weight",
		"layers.2.gdn.a_log":       "model.layers.2.linear_attn.A_log",
		"layers.3.attn.q":          "model.layers.3.self_attn.q_proj.weight",
		"layers.3.attn.k_norm":     "model.layers.3.self_attn.k_norm.weight",
		"layers.1.moe.router":      "model.layers.1.mlp.gate.weight",
		"layers.3.moe.shared_gate": "model.layers.3.mlp.shared_expert_gate.weight",
	}
	for role, name := range direct {
		got := read(t, h, spec(t, cfg, role), -1, "f32")
		want, _ := ck.Tensor(name)
		if string(got) != string(want.Data) {
			t.Errorf("role %s differs from %s", role, name)
		}
	}
}

func TestTinyAExpertSlice(t *testing.T) {
	ck, h := openTinyA(t)
	cfg := tinyA()
	for _, proj := range []struct{ role, hf string }{{"gate", "gate_proj"}, {"up", "up_proj"}, {"down", "down_proj"}} {
		s := spec(t, cfg, "layers.2.moe.experts."+proj.role)
		var whole []float32
		for e := range s.Shape[0] {
			want := hfFloats(t, ck, fmt.Sprintf("model.layers.2.mlp.experts.%d.%s.weight", e, proj.hf))
			got := decode(t, "f32", read(t, h, s, e, "f32"))
			if !slices.Equal(got, want) {
				t.Fatalf("%s expert %d differs from the HF tensor", s.Name, e)
			}
			whole = append(whole, want...)
		}
		if got := decode(t, "f32", read(t, h, s, -1, "f32")); !slices.Equal(got, whole) {
			t.Errorf("%s read whole is not the experts stacked", s.Name)
		}
	}
}

func TestTinyAConvSqueezed(t *testing.T) {
	ck, h := openTinyA(t)
	cfg := tinyA()
	s := spec(t, cfg, "layers.1.gdn.conv")
	if !slices.Equal(s.Shape, []int{128, 4}) {
		t.Fatalf("conv spec shape %v", s.Shape)
	}
	want := hfFloats(t, ck, "model.layers.1.linear_attn.conv1d.weight") // [128,1,4]
	if got := decode(t, "f32", read(t, h, s, -1, "f32")); !slices.Equal(got, want) {
		t.Error("conv differs from the squeezed HF tensor")
	}
	// Channel 70's taps are its row of the squeezed [C,K] tensor.
	if got := decode(t, "f32", read(t, h, s, 70, "f32")); !slices.Equal(got, want[70*4:71*4]) {
		t.Errorf("conv channel 70 = %v, want %v", got, want[70*4:71*4])
	}
}

func TestTinyAConvert(t *testing.T) {
	ck, h := openTinyA(t)
	cfg := tinyA()
	s := spec(t, cfg, "layers.0.gdn.qkvz")
	vals := hfFloats(t, ck, "model.layers.0.linear_attn.in_proj_qkvz.weight")
	bf := read(t, h, s, -1, "bf16")
	f16 := read(t, h, s, -1, "f16")
	for i, v := range vals {
		if got := binary.LittleEndian.Uint16(bf[2*i:]); got != quant.BF16(v) {
			t.Fatalf("bf16 element %d: %04x, want %04x", i, got, quant.BF16(v))
		}
		if got := binary.LittleEndian.Uint16(f16[2*i:]); got != quant.F16(v) {
			t.Fatalf("f16 element %d: %04x, want %04x", i, got, quant.F16(v))
		}
	}
	// An expert slice converts the same way.
	es := spec(t, cfg, "layers.0.moe.experts.up")
	ev := hfFloats(t, ck, "model.layers.0.mlp.experts.9.up_proj.weight")
	eb := read(t, h, es, 9, "bf16")
	for i, v := range ev {
		if got := binary.LittleEndian.Uint16(eb[2*i:]); got != quant.BF16(v) {
			t.Fatalf("expert bf16 element %d: %04x, want %04x", i, got, quant.BF16(v))
		}
	}
}

func TestTinyK512BF16(t *testing.T) {
	ck, err := safetensors.OpenDir("../../testdata/oracles/tiny-k512")
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	cfg := tinyA()
	cfg.Architecture.VocabSize = 1024
	cfg.Architecture.MoE.NumExperts = 512
	cfg.Architecture.MoE.ExpertsPerToken = 10
	cfg.Architecture.MoE.IntermediateSize = 16
	h := NewHF(ck, cfg)
	if err := h.Check(cfg.Tensors()); err != nil {
		t.Fatal(err)
	}
	// bf16 → bf16 is a byte copy; bf16 → f32 widens exactly.
	s := spec(t, cfg, "head")
	src, _ := ck.Tensor("lm_head.weight")
	if got := read(t, h, s, -1, "bf16"); string(got) != string(src.Data) {
		t.Error("bf16 head is not a copy of lm_head.weight")
	}
	want, _ := src.Float32s()
	if got := decode(t, "f32", read(t, h, s, -1, "f32")); !slices.Equal(got, want) {
		t.Error("f32 head differs from the widened bf16 values")
	}
	es := spec(t, cfg, "layers.3.moe.experts.down")
	ew := hfFloats(t, ck, "model.layers.3.mlp.experts.511.down_proj.weight")
	if got := decode(t, "f32", read(t, h, es, 511, "f32")); !slices.Equal(got, ew) {
		t.Error("expert 511 differs")
	}
}

// --- synthetic checkpoints ---

// tiny1 is a two-layer config (one attention, one GDN layer) small enough to
// write out.
func tiny1() *models.Config {
	cfg := tinyA()
	a := &cfg.Architecture
	a.HiddenSize, a.NumLayers, a.VocabSize = 8, 2, 16
	a.LayerTypes = []string{models.LayerFullAttention, models.LayerLinearAttention}
	a.Attention = models.Attention{NumHeads: 2, NumKVHeads: 1, HeadDim: 4, OutputGate: true, PartialRotaryFactor: 0.5, RopeTheta: 1e4}
	a.LinearAttention = models.LinearAttention{NumKeyHeads: 1, NumValueHeads: 2, KeyHeadDim: 4, ValueHeadDim: 4, ConvKernel: 4}
	a.MoE.NumExperts, a.MoE.ExpertsPerToken, a.MoE.IntermediateSize, a.MoE.SharedExpertIntermediateSize = 4, 2, 6, 4
	return cfg
}

// hfLayerNames is this test's own copy of the HF naming, so a slip in the
// package's table shows up as a missing tensor.
var hfLayerNames = map[string]string{
	"attn_norm": "input_layernorm.weight", "ffn_norm": "post_attention_layernorm.weight",
	"gdn.qkvz": "linear_attn.in_proj_qkvz.weight", "gdn.ba": "linear_attn.in_proj_ba.weight",
	"gdn.conv": "linear_attn.conv1d.weight", "gdn.a_log": "linear_attn.A_log",
	"gdn.dt_bias": "linear_attn.dt_bias", "gdn.norm": "linear_attn.norm.weight",
	"gdn.out": "linear_attn.out_proj.weight",
	"attn.q":  "self_attn.q_proj.weight", "attn.k": "self_attn.k_proj.weight",
	"attn.v": "self_attn.v_proj.weight", "attn.o": "self_attn.o_proj.weight",
	"attn.q_norm": "self_attn.q_norm.weight", "attn.k_norm": "self_attn.k_norm.weight",
	"moe.router": "mlp.gate.weight", "moe.shared.gate": "mlp.shared_expert.gate_proj.weight",
	"moe.shared.up": "mlp.shared_expert.up_proj.weight", "moe.shared.down": "mlp.shared_expert.down_proj.weight",
	"moe.shared_gate": "mlp.shared_expert_gate.weight",
}

func bf16Tensor(name string, shape []int, vals []float32) safetensors.Tensor {
	d := make([]byte, 2*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint16(d[2*i:], quant.BF16(v))
	}
	return safetensors.Tensor{Name: name, DType: "BF16", Shape: shape, Data: d}
}

// synth builds the HF tensors of cfg with random values, experts per expert
// (fused false) or as gate_up_proj + down_proj (fused true). The same seed
// gives the same values in both forms.
func synth(cfg *models.Config, fused bool) []safetensors.Tensor {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	var out []safetensors.Tensor
	experts := map[string][]float32{} // "layer.proj" → stacked values
	for _, s := range cfg.Tensors() {
		vals := random(s.Elements())
		switch s.Name {
		case "embed":
			out = append(out, bf16Tensor("model.embed_tokens.weight", s.Shape, vals))
			continue
		case "final_norm":
			out = append(out, bf16Tensor("model.norm.weight", s.Shape, vals))
			continue
		case "head":
			out = append(out, bf16Tensor("lm_head.weight", s.Shape, vals))
			continue
		}
		var l int
		var role string
		fmt.Sscanf(s.Name, "layers.%d.", &l)
		role = strings.SplitN(s.Name, ".", 3)[2]
		prefix := fmt.Sprintf("model.layers.%d.", l)
		if name, ok := hfLayerNames[role]; ok {
			shape := s.Shape
			if role == "gdn.conv" {
				shape = []int{s.Shape[0], 1, s.Shape[1]}
			}
			out = append(out, bf16Tensor(prefix+name, shape, vals))
			continue
		}
		proj := strings.TrimPrefix(role, "moe.experts.") + "_proj"
		E, rows, cols := s.Shape[0], s.Shape[1], s.Shape[2]
		if !fused {
			for e := range E {
				out = append(out, bf16Tensor(fmt.Sprintf("%smlp.experts.%d.%s.weight", prefix, e, proj), s.Shape[1:], vals[e*rows*cols:(e+1)*rows*cols]))
			}
			continue
		}
		experts[prefix+proj] = vals
		if proj == "down_proj" {
			// With ".weight" here and without on gate_up_proj: both spellings occur.
			out = append(out, bf16Tensor(prefix+"mlp.experts.down_proj.weight", s.Shape, vals))
		}
		if gate, up := experts[prefix+"gate_proj"], experts[prefix+"up_proj"]; gate != nil && up != nil && (proj == "gate_proj" || proj == "up_proj") {
			var gu []float32
			for e := range E {
				gu = append(gu, gate[e*rows*cols:(e+1)*rows*cols]...)
				gu = append(gu, up[e*rows*cols:(e+1)*rows*cols]...)
			}
			out = append(out, bf16Tensor(prefix+"mlp.experts.gate_up_proj", []int{E, 2 * rows, cols}, gu))
		}
	}
	return out
}

func writeCheckpoint(t *testing.T, tensors []safetensors.Tensor) *safetensors.Checkpoint {
	t.Helper()
	dir := t.TempDir()
	if err := safetensors.WriteFile(filepath.Join(dir, safetensors.SingleFileName), tensors, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}

func TestFusedExpertsMatchPerExpert(t *testing.T) {
	cfg := tiny1()
	per := NewHF(writeCheckpoint(t, synth(cfg, false)), cfg)
	fusedCk := writeCheckpoint(t, synth(cfg, true))
	fused := NewHF(fusedCk, cfg)
	if _, ok := fusedCk.Tensor("model.layers.0.mlp.experts.0.gate_proj.weight"); ok {
		t.Fatal("fused checkpoint has per-expert tensors")
	}
	for _, h := range []*HF{per, fused} {
		if err := h.Check(cfg.Tensors()); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range cfg.Tensors() {
		for _, format := range []string{"f32", "bf16"} {
			if a, b := read(t, per, s, -1, format), read(t, fused, s, -1, format); string(a) != string(b) {
				t.Errorf("%s %s: per-expert and fused forms differ", s.Name, format)
			}
			if len(s.Shape) == 3 {
				for e := range s.Shape[0] {
					if a, b := read(t, per, s, e, format), read(t, fused, s, e, format); string(a) != string(b) {
						t.Errorf("%s expert %d %s: per-expert and fused forms differ", s.Name, e, format)
					}
				}
			}
		}
	}
	// And the fused gate half really is the gate: expert 1 of layer 1.
	gate := spec(t, cfg, "layers.1.moe.experts.gate")
	want := hfFloats(t, per.ck, "model.layers.1.mlp.experts.1.gate_proj.weight")
	if got := decode(t, "f32", read(t, fused, gate, 1, "f32")); !slices.Equal(got, want) {
		t.Error("fused gate half of expert 1 is not gate_proj")
	}
}

// without returns ts less the named tensors.
func without(ts []safetensors.Tensor, names ...string) []safetensors.Tensor {
	return slices.DeleteFunc(slices.Clone(ts), func(t safetensors.Tensor) bool { return slices.Contains(names, t.Name) })
}

func TestErrors(t *testing.T) {
	cfg := tiny1()
	base := synth(cfg, false)

	// A missing tensor and a wrong shape, reported together by Check.
	ts := without(base, "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight")
	ts = append(ts, bf16Tensor("model.layers.0.self_attn.k_proj.weight", []int{3, 8}, make([]float32, 24)))
	ck := writeCheckpoint(t, ts)
	h := NewHF(ck, cfg)
	err := h.Check(cfg.Tensors())
	if err == nil {
		t.Fatal("Check passed a checkpoint with a missing and a misshapen tensor")
	}
	file := ck.FileOf("model.layers.0.self_attn.k_proj.weight")
	for _, want := range []string{
		"checkpoint " + ck.Dir() + " has no tensor model.layers.0.self_attn.q_proj.weight (role layers.0.attn.q)",
		"tensor model.layers.0.self_attn.k_proj.weight in " + file + " has shape [3 8], expected [4 8] from model.toml/config (role layers.0.attn.k)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Check error\n%v\ndoes not contain\n%s", err, want)
		}
	}
	// Read reports the same.
	q := spec(t, cfg, "layers.0.attn.q")
	if err := h.Read(q, -1, "f32", make([]byte, 4*q.Elements())); err == nil || !strings.Contains(err.Error(), "model.layers.0.self_attn.q_proj.weight") {
		t.Errorf("Read of a missing tensor: %v", err)
	}

	// Missing experts: the first is named, the rest counted.
	h = NewHF(writeCheckpoint(t, without(base, "model.layers.1.mlp.experts.2.down_proj.weight", "model.layers.1.mlp.experts.3.down_proj.weight")), cfg)
	err = h.Check(cfg.Tensors())
	if err == nil || !strings.Contains(err.Error(), "no tensor model.layers.1.mlp.experts.2.down_proj.weight") || !strings.Contains(err.Error(), "lacks 2 of 4 experts") {
		t.Errorf("missing experts: %v", err)
	}
	// No expert tensors in either form.
	var noExperts []string
	for e := range 4 {
		noExperts = append(noExperts, fmt.Sprintf("model.layers.0.mlp.experts.%d.gate_proj.weight", e))
	}
	h = NewHF(writeCheckpoint(t, without(base, noExperts...)), cfg)
	err = h.Check(cfg.Tensors())
	if err == nil || !strings.Contains(err.Error(), "model.layers.0.mlp.experts.0.gate_proj.weight") || !strings.Contains(err.Error(), "model.layers.0.mlp.experts.gate_up_proj") {
		t.Errorf("no experts: %v", err)
	}

	// Unsupported dtype.
	ts = without(base, "model.norm.weight")
	ts = append(ts, safetensors.Tensor{Name: "model.norm.weight", DType: "I32", Shape: []int{8}, Data: make([]byte, 32)})
	h = NewHF(writeCheckpoint(t, ts), cfg)
	if err := h.Check(cfg.Tensors()); err == nil || !strings.Contains(err.Error(), "dtype I32") || !strings.Contains(err.Error(), "model.norm.weight") {
		t.Errorf("I32 norm: %v", err)
	}

	h = NewHF(writeCheckpoint(t, base), cfg)
	// Index out of range, wrong destination size, unknown format and roles.
	ex := spec(t, cfg, "layers.0.moe.experts.up")
	if err := h.Read(ex, 4, "f32", make([]byte, 4*6*8)); err == nil || !strings.Contains(err.Error(), "out of range") || !strings.Contains(err.Error(), "layers.0.moe.experts.up") {
		t.Errorf("index 4 of 4 experts: %v", err)
	}
	if err := h.Read(ex, 0, "f32", make([]byte, 4*6*8-1)); err == nil || !strings.Contains(err.Error(), "destination") {
		t.Errorf("short destination: %v", err)
	}
	if err := h.Read(ex, 0, "q9", make([]byte, 4*6*8)); err == nil || !strings.Contains(err.Error(), "q9") {
		t.Errorf("unknown format: %v", err)
	}
	for _, role := range []string{"layers.0.attn.qq", "layers.9.attn.q", "layers.x.attn.q", "layers.01.attn.q", "nonsense"} {
		if err := h.Check([]models.TensorSpec{{Name: role, Shape: []int{1}}}); err == nil || !strings.Contains(err.Error(), "unknown tensor role") {
			t.Errorf("role %s: %v", role, err)
		}
	}
}

func TestTiedHead(t *testing.T) {
	cfg := tiny1()
	cfg.Architecture.TieWordEmbeddings = true
	ck := writeCheckpoint(t, without(synth(cfg, false), "lm_head.weight"))
	h := NewHF(ck, cfg)
	if err := h.Check(cfg.Tensors()); err != nil {
		t.Fatal(err)
	}
	head, embed := spec(t, cfg, "head"), spec(t, cfg, "embed")
	if a, b := read(t, h, head, -1, "f32"), read(t, h, embed, -1, "f32"); string(a) != string(b) {
		t.Error("tied head differs from the embeddings")
	}
	// Untied without lm_head is an error naming it.
	cfg.Architecture.TieWordEmbeddings = false
	if err := NewHF(ck, cfg).Check(cfg.Tensors()); err == nil || !strings.Contains(err.Error(), "lm_head.weight") {
		t.Errorf("untied head without lm_head: %v", err)
	}
}
