package convert_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/arch"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/tools/convert"
	"github.com/strata-llm/strata/runtime/weights"
)

func TestParsePlan(t *testing.T) {
	base := models.QuantPlan{Trunk: "bf16", Experts: "bf16", Embeddings: "bf16", Head: "bf16"}
	for _, c := range []struct {
		plan, want, err string
	}{
		{"", "trunk=bf16,experts=bf16,embed=bf16,head=bf16", ""},
		{"experts=iq2_xs,trunk=q8_0,embed=q8_0,head=q6_K", "trunk=q8_0,experts=iq2_xs,embed=q8_0,head=q6_k,router=f16", ""},
		{"trunk=q4_k,router=bf16", "trunk=q4_k,experts=bf16,embed=bf16,head=bf16,router=bf16", ""},
		{"all=q8_0, experts = IQ2_XS ,rows=fallback", "trunk=q8_0,experts=iq2_xs,embed=q8_0,head=q8_0,router=f16,rows=fallback", ""},
		{"embeddings=f16", "trunk=bf16,experts=bf16,embed=f16,head=bf16", ""},
		{"experts", "", `item 1 "experts": expected class=format`},
		{"trunk=q8_0,ffn=q4_k", "", `item 2 "ffn=q4_k": unknown class "ffn"`},
		{"head=q7_k", "", `unknown quant format "q7_k"`},
		{"experts=iq2_xxs", "", "strata decodes iq2_xxs but cannot quantize to it"},
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
	// Refused while planning, before anything is written.
	twoPLE := *flash
	twoPLE.Architecture.PLE.LayerIDs = []int{2, 3}
	if _, err := convert.Write(filepath.Join(t.TempDir(), "x.gguf"), &twoPLE, weights.NewRandom(1), convert.Options{}); !errors.Is(err, convert.ErrUnsupported) || !strings.Contains(err.Error(), "one PLE layer") {
		t.Errorf("two PLE layers: %v, want ErrUnsupported", err)
	}
	silu := *flash
	silu.Architecture.LinearAttention.GateAct = "silu"
	if _, err := convert.Write(filepath.Join(t.TempDir(), "x.gguf"), &silu, weights.NewRandom(1), convert.Options{}); err == nil || !strings.Contains(err.Error(), `gate_act is "silu"`) {
		t.Errorf("silu gate: %v", err)
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

// synthFile writes model (with MTP, so the next-n names are exercised) from
// random weights in plan.
func synthFile(t *testing.T, model, plan string) (string, *models.Config) {
	t.Helper()
	c, err := models.Embedded(model)
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
		if s.Host() {
			checkTable(t, g, src, s, cfg.Quant)
			continue
		}
		rl, err := s.Layout(cfg.Quant)
		if err != nil {
			t.Fatal(err)
		}
		if reordered(cfg, s.Name) && rl.Format.BlockElems > 1 {
			// Quantized after its columns moved, and again when read back
			// where blocks straddle value heads: compare the values.
			if e := relRMS(t, g, src, s); e > 0.15 {
				t.Errorf("%s: role %s (%s, columns reordered) read back with relative RMS error %.3g", filepath.Base(path), s.Name, rl.Format.Name, e)
			}
			continue
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

// reordered reports whether a qwen4exp role's columns are reordered in GGUF.
func reordered(cfg *models.Config, role string) bool {
	if cfg.Architecture.ModelType != models.TypeQwen4Exp {
		return false
	}
	m, err := arch.Qwen4ExpRole(arch.Qwen4ExpDimsOf(cfg), role)
	return err == nil && m.Cols != nil
}

// relRMS is the relative RMS difference of a role read back as f32 from the
// GGUF and from the random source.
func relRMS(t *testing.T, g *weights.GGUF, src *weights.Random, s models.TensorSpec) float64 {
	t.Helper()
	a, b := make([]byte, 4*s.Elements()), make([]byte, 4*s.Elements())
	if err := g.Read(s, -1, "f32", a); err != nil {
		t.Fatal(err)
	}
	if err := src.Read(s, -1, "f32", b); err != nil {
		t.Fatal(err)
	}
	var d, n float64
	for i := 0; i < len(a); i += 4 {
		x, y := float64(math.Float32frombits(binary.LittleEndian.Uint32(a[i:]))), float64(math.Float32frombits(binary.LittleEndian.Uint32(b[i:])))
		d, n = d+(x-y)*(x-y), n+y*y
	}
	return math.Sqrt(d / n)
}

// checkTable compares the n-gram table read back from the GGUF with the
// random source's, row for row in the planned layout (the embed class).
func checkTable(t *testing.T, g *weights.GGUF, src *weights.Random, s models.TensorSpec, plan models.QuantPlan) {
	t.Helper()
	ls := s
	ls.Class = models.ClassEmbeddings
	rl, err := ls.Layout(plan)
	if err != nil {
		t.Fatal(err)
	}
	a, err := g.NgramTable(s)
	if err != nil {
		t.Fatal(err)
	}
	b, err := src.NgramTable(s)
	if err != nil {
		t.Fatal(err)
	}
	if a.Layout() != rl || a.Rows() != s.Shape[0] {
		t.Fatalf("table %s: %d rows as %+v, want %d as %+v", s.Name, a.Rows(), a.Layout(), s.Shape[0], rl)
	}
	got, want := make([]byte, a.Rows()*rl.RowBytes()), make([]byte, a.Rows()*rl.RowBytes())
	if err := a.ReadRows(0, rl, got); err != nil {
		t.Fatal(err)
	}
	if err := b.ReadRows(0, rl, want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("table %s (%s) read back differs", s.Name, rl.Format.Name)
	}
	// Gathering any row gives the same values as its block decoded.
	ids := []int64{0, int64(a.Rows() - 1), int64(a.Rows() / 3)}
	x, y := make([]float32, len(ids)*a.Width()), make([]float32, len(ids)*a.Width())
	if err := a.Gather(ids, x); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		rl.DecodeRow(want[int(id)*rl.RowBytes():], y[i*a.Width():(i+1)*a.Width()])
	}
	if !slices.Equal(x, y) {
		t.Errorf("table %s: gathered rows differ from the stored ones", s.Name)
	}
}

// Every role survives the trip through the qwen3next and qwen4exp names:
// split GDN input, tiled value heads, stacked experts, next-n MTP tensors, +1
// and −exp values, padded rows, the n-gram table.
func TestRolesRoundTrip(t *testing.T) {
	for _, model := range []string{"tiny-a", "q4-a"} {
		for _, plan := range []string{"", "all=q8_0", "experts=iq2_xs,trunk=q4_k,rows=pad", "experts=iq2_xs,trunk=q4_k,rows=fallback"} {
			t.Run(model+"/"+plan, func(t *testing.T) {
				path, cfg := synthFile(t, model, plan)
				checkRoles(t, path, cfg)
			})
		}
	}
}

// The other layouts llama.cpp files use read the same: the legacy GDN input
// (ssm_in, HF's grouped order) and fused ffn_gate_up_exps.
func TestReadsOlderForms(t *testing.T) {
	path, cfg := synthFile(t, "tiny-a", "experts=iq2_xs,trunk=q8_0,rows=pad")
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
	form := arch.DetectQwenNextForm(lf.Has, 0, 3)
	lf.Close()
	if !form.LegacySSMIn || !form.FusedGateUp {
		t.Fatalf("detected %+v, want legacy ssm_in and fused gate_up", form)
	}
	checkRoles(t, legacy, cfg)
}

// A qwen4_exp model without PLE layers has no table and an empty ple.layers.
func TestQwen4WithoutPLE(t *testing.T) {
	c, err := models.Embedded("q4-a")
	if err != nil {
		t.Fatal(err)
	}
	c.Architecture.PLE.LayerIDs = nil
	path := filepath.Join(t.TempDir(), "m.gguf")
	rep, err := convert.Write(path, c, weights.NewRandom(7), convert.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkRoles(t, path, rep.Config)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ids, err := f.Ints("qwen4exp.ple.layers"); err != nil || len(ids) != 0 || f.Has(arch.NameNgramTable) {
		t.Errorf("ple.layers %v (%v), table present %v", ids, err, f.Has(arch.NameNgramTable))
	}
}
