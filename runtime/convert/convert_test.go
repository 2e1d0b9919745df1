package convert_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/convert"
	"github.com/strata-llm/strata/runtime/gguf"
	"github.com/strata-llm/strata/runtime/weights"
)

func TestParsePlan(t *testing.T) {
	base := models.QuantPlan{Trunk: "bf16", Experts: "bf16", Embeddings: "bf16", Head: "bf16"}
	for _, c := range []struct {
		plan, want, err string
	}{
		{"", "trunk=bf16,experts=bf16,embed=bf16,head=bf16", ""},
		{"experts=iq2_xs,trunk=q8_0,embed=q8_0,head=q6_K", "trunk=q8_0,experts=iq2_xs,embed=q8_0,head=q6_k", ""},
		{"all=q8_0, experts = IQ2_XS ,rows=fallback", "trunk=q8_0,experts=iq2_xs,embed=q8_0,head=q8_0,rows=fallback", ""},
		{"embeddings=f16", "trunk=bf16,experts=bf16,embed=f16,head=bf16", ""},
		{"experts", "", `item 1 "experts": expected class=format`},
		{"trunk=q8_0,ffn=q4_k", "", `item 2 "ffn=q4_k": unknown class "ffn"`},
		{"head=q5_k", "", `unknown quant format "q5_k"`},
		{"rows=tight", "", `unknown row policy "tight"`},
	} {
		q, err := convert.ParsePlan(base, c.plan)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: error %v, want %q", c.plan, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%q: %v", c.plan, err)
		case c.err == "" && convert.String(q) != c.want:
			t.Errorf("%q: %s, want %s", c.plan, convert.String(q), c.want)
		}
	}
}

func TestRefusesWhatGGUFCannotHold(t *testing.T) {
	flash, err := models.Embedded("qwen38-flash-next")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := convert.Write(filepath.Join(t.TempDir(), "x.gguf"), flash, weights.NewRandom(1), convert.Options{}); !errors.Is(err, convert.ErrUnsupported) {
		t.Errorf("qwen4_exp: %v, want ErrUnsupported", err)
	}
	c, err := models.Embedded("tiny-a")
	if err != nil {
		t.Fatal(err)
	}
	c.Architecture.LayerTypes = []string{models.LayerLinearAttention, models.LayerFullAttention, models.LayerLinearAttention, models.LayerLinearAttention}
	if _, err := convert.Write(filepath.Join(t.TempDir(), "x.gguf"), c, weights.NewRandom(1), convert.Options{}); err == nil || !strings.Contains(err.Error(), "do not repeat every 2 layers") {
		t.Errorf("irregular layer pattern: %v", err)
	}
}

// synthFile writes tiny-a (with MTP, so the next-n names are exercised)
// from random weights in plan.
func synthFile(t *testing.T, plan string) (string, *models.Config) {
	t.Helper()
	c, err := models.Embedded("tiny-a")
	if err != nil {
		t.Fatal(err)
	}
	c.Architecture.MTP.NumLayers = 1
	if c.Quant, err = convert.ParsePlan(c.Quant, plan); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	rep, err := convert.Write(path, c, weights.NewRandom(7), convert.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return path, rep.Config
}

// checkRoles reads every role back from a GGUF and compares it, byte for
// byte in its planned layout, with what the random source produced.
func checkRoles(t *testing.T, path string, cfg *models.Config) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g, err := weights.NewGGUF(f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Check(cfg.Tensors()); err != nil {
		t.Fatal(err)
	}
	src := weights.NewRandom(7)
	for _, s := range cfg.Tensors() {
		rl, err := s.Layout(cfg.Quant)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, s.Rows()*rl.RowBytes())
		got := make([]byte, len(want))
		if err := src.Read(s, -1, rl.Format.Name, want); err != nil {
			t.Fatal(err)
		}
		if err := g.Read(s, -1, rl.Format.Name, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: role %s (%s) read back differs", filepath.Base(path), s.Name, rl.Format.Name)
		}
	}
}

// Every role survives the trip through the qwen3next names: split GDN input,
// stacked experts, next-n MTP tensors, +1 and −exp values, padded rows.
func TestRolesRoundTrip(t *testing.T) {
	for _, plan := range []string{"", "all=q8_0", "experts=iq2_xs,trunk=q4_k,rows=pad", "experts=iq2_xs,trunk=q4_k,rows=fallback"} {
		t.Run(plan, func(t *testing.T) {
			path, cfg := synthFile(t, plan)
			checkRoles(t, path, cfg)
		})
	}
}

// The other layouts llama.cpp files use read the same: the legacy GDN input
// (ssm_in, HF's grouped order) and fused ffn_gate_up_exps.
func TestReadsOlderForms(t *testing.T) {
	path, cfg := synthFile(t, "experts=iq2_xs,trunk=q8_0,rows=pad")
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	src := weights.NewRandom(7)
	role := func(name string) []byte {
		for _, s := range cfg.Tensors() {
			if s.Name == name {
				rl, _ := s.Layout(cfg.Quant)
				b := make([]byte, s.Rows()*rl.RowBytes())
				if err := src.Read(s, -1, rl.Format.Name, b); err != nil {
					t.Fatal(err)
				}
				return b
			}
		}
		t.Fatalf("no role %s", name)
		return nil
	}
	var out []gguf.Tensor
	for _, ti := range f.Tensors {
		tt, _ := f.Tensor(ti.Name)
		l, _ := gguf.BlockOf(ti.Name)
		switch {
		case strings.HasSuffix(ti.Name, ".attn_gate.weight"):
			continue // folded into ssm_in
		case strings.HasSuffix(ti.Name, ".attn_qkv.weight"):
			data := role(fmt.Sprintf("layers.%d.gdn.qkvz", l))
			rows := uint64(len(data)) / uint64(tt.RowBytes())
			out = append(out, gguf.Tensor{TensorInfo: gguf.TensorInfo{Name: fmt.Sprintf("blk.%d.ssm_in.weight", l), Dims: []uint64{ti.Dims[0], rows}, Type: ti.Type}, Data: data})
		case strings.HasSuffix(ti.Name, ".ffn_up_exps.weight"):
			continue // folded into ffn_gate_up_exps
		case strings.HasSuffix(ti.Name, ".ffn_gate_exps.weight"):
			up, _ := f.Tensor(fmt.Sprintf("blk.%d.ffn_up_exps.weight", l))
			slice := int(ti.Dims[1]) * int(tt.RowBytes())
			var data []byte
			for e := 0; e < int(ti.Dims[2]); e++ {
				data = append(data, tt.Data[e*slice:(e+1)*slice]...)
				data = append(data, up.Data[e*slice:(e+1)*slice]...)
			}
			out = append(out, gguf.Tensor{TensorInfo: gguf.TensorInfo{Name: fmt.Sprintf("blk.%d.ffn_gate_up_exps.weight", l), Dims: []uint64{ti.Dims[0], 2 * ti.Dims[1], ti.Dims[2]}, Type: ti.Type}, Data: data})
		default:
			out = append(out, gguf.Tensor{TensorInfo: ti, Data: tt.Data})
		}
	}
	kv := f.KV
	for _, o := range out {
		if strings.HasSuffix(o.Name, "ffn_gate_up_exps.weight") {
			kv = append(kv, gguf.KV{Key: gguf.KeyRowLengthPrefix + o.Name, Value: uint32(cfg.Architecture.HiddenSize)})
		}
	}
	legacy := filepath.Join(t.TempDir(), "legacy.gguf")
	if err := gguf.WriteFile(legacy, kv, out); err != nil {
		t.Fatal(err)
	}
	lf, err := gguf.Open(legacy)
	if err != nil {
		t.Fatal(err)
	}
	form := gguf.DetectQwenNextForm(lf.Has, 0, 3)
	lf.Close()
	if !form.LegacySSMIn || !form.FusedGateUp {
		t.Fatalf("detected %+v, want legacy ssm_in and fused gate_up", form)
	}
	checkRoles(t, legacy, cfg)
}
