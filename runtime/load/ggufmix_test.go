package load_test

import (
	"bytes"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/format/safetensors"
	"github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/tools/convert"
	"github.com/strata-llm/strata/runtime/weights"
)

// mixFormat is the test's llama.cpp-style mix: per (kind, layer) the format a
// tensor is stored in, "" to keep it as converted (norms, 1-D and small
// tensors stay f32, as llama-quantize keeps them). The same rule is applied
// to the GGUF's tensors and to the HF checkpoint's, so the reference holds
// the very values the mixed file holds.
func mixFormat(kind string, layer int) string {
	switch kind {
	case "router":
		return "f16" // as llama.cpp's mixes keep ffn_gate_inp
	case "gate_up":
		return []string{"q8_0", "iq4_nl"}[layer%2]
	case "down":
		return []string{"iq4_nl", "q8_0"}[layer%2] // one class, two formats
	case "shexp":
		return "f16"
	case "trunk":
		return []string{"bf16", "q8_0"}[layer%2]
	case "embed":
		return "q8_0"
	case "head":
		return "f16"
	}
	return ""
}

var blkRe, hfLayerRe = regexp.MustCompile(`^blk\.(\d+)\.`), regexp.MustCompile(`^model\.layers\.(\d+)\.`)

// ggufKind classifies a GGUF tensor for mixFormat.
func ggufKind(name string, dims []uint64) (string, int) {
	layer := -1
	if m := blkRe.FindStringSubmatch(name); m != nil {
		layer, _ = strconv.Atoi(m[1])
	}
	switch {
	case name == "token_embd.weight":
		return "embed", layer
	case name == "output.weight":
		return "head", layer
	case strings.HasSuffix(name, ".ffn_gate_inp.weight"):
		return "router", layer
	case strings.HasSuffix(name, "_exps.weight") && strings.Contains(name, "ffn_down"):
		return "down", layer
	case strings.HasSuffix(name, "_exps.weight"):
		return "gate_up", layer
	case strings.Contains(name, "ffn_gate_inp_shexp"):
		return "", layer
	case strings.HasSuffix(name, "_shexp.weight"):
		return "shexp", layer
	case layer >= 0 && len(dims) == 2 && dims[1] > 1 && !strings.Contains(name, "norm") && dims[0]%32 == 0:
		return "trunk", layer
	}
	return "", layer
}

// hfKind classifies an HF tensor of a qwen3_next checkpoint the same way.
func hfKind(name string, shape []int) (string, int) {
	layer := -1
	if m := hfLayerRe.FindStringSubmatch(name); m != nil {
		layer, _ = strconv.Atoi(m[1])
	}
	switch {
	case name == "model.embed_tokens.weight":
		return "embed", layer
	case name == "lm_head.weight":
		return "head", layer
	case strings.HasSuffix(name, ".mlp.gate.weight"):
		return "router", layer
	case strings.Contains(name, ".mlp.experts.") && strings.HasSuffix(name, "down_proj.weight"):
		return "down", layer
	case strings.Contains(name, ".mlp.experts."):
		return "gate_up", layer
	case strings.Contains(name, ".mlp.shared_expert."):
		return "shexp", layer
	case layer >= 0 && len(shape) == 2 && shape[0] > 1 && !strings.Contains(name, "norm") && !strings.Contains(name, "shared_expert_gate") && shape[1]%32 == 0:
		return "trunk", layer
	}
	return "", layer
}

// writeMix rewrites the f32 GGUF at src into dst with mixFormat's types,
// without strata's metadata (strata.config, strata.exact.*) unless keepConfig;
// override replaces one tensor's type by a raw ggml type (zero data).
func writeMix(t *testing.T, src, dst string, keepConfig bool, override map[string]int) {
	t.Helper()
	writeMixRule(t, src, dst, keepConfig, override, func(name string, dims []uint64) string { return mixFormat(ggufKind(name, dims)) })
}

// writeMixRule is writeMix with the format of each tensor from rule ("" keeps
// it; "f32" decodes a quantized one).
func writeMixRule(t *testing.T, src, dst string, keepConfig bool, override map[string]int, rule func(name string, dims []uint64) string) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var kv []gguf.KV
	for _, p := range f.KV {
		if strings.HasPrefix(p.Key, "strata.") && !(keepConfig && p.Key == gguf.KeyConfig) {
			continue
		}
		kv = append(kv, p)
	}
	var ts []gguf.Tensor
	for _, ti := range f.Tensors {
		tn, _ := f.Tensor(ti.Name)
		out := gguf.Tensor{TensorInfo: gguf.TensorInfo{Name: ti.Name, Dims: ti.Dims, Type: ti.Type}, Data: tn.Data}
		if code, ok := override[ti.Name]; ok {
			typ, err := quant.GGMLTypeByCode(code)
			if err != nil {
				t.Fatal(err)
			}
			out.Type = typ
			out.Data = make([]byte, ti.Elements()/int64(typ.BlockElems)*int64(typ.BlockBytes))
		} else if name := rule(ti.Name, ti.Dims); name != "" {
			from, err := quant.ByCode(ti.Type.Code)
			if err != nil {
				t.Fatal(err)
			}
			to := mustQuant(t, name)
			v := make([]float32, ti.Elements())
			from.Decode(tn.Data, v)
			out.Data = make([]byte, to.Bytes(len(v)))
			to.Encode(v, out.Data)
			if out.Type, err = quant.GGMLTypeByCode(to.Code); err != nil {
				t.Fatal(err)
			}
		}
		ts = append(ts, out)
	}
	if err := gguf.WriteFile(dst, kv, ts); err != nil {
		t.Fatal(err)
	}
}

func mustQuant(t *testing.T, name string) *quant.Format {
	t.Helper()
	f, err := quant.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// decodedCheckpoint writes the oracle's HF checkpoint with every tensor
// passed through mixFormat's format (quant's encoder, then its decoder) as
// f32: the mixed file's values, by a path that never reads the GGUF.
func decodedCheckpoint(t *testing.T, oracle, dir string) {
	t.Helper()
	src := filepath.Join("../../testdata/oracles", oracle)
	ck, err := safetensors.OpenDir(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var out []safetensors.Tensor
	for _, name := range ck.Names() {
		tn, _ := ck.Tensor(name)
		v, err := tn.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		if fname := mixFormat(hfKind(name, tn.Shape)); fname != "" {
			f := mustQuant(t, fname)
			b := make([]byte, f.Bytes(len(v)))
			f.Encode(v, b)
			f.Decode(b, v)
		}
		b := make([]byte, 4*len(v))
		mustQuant(t, "f32").Encode(v, b)
		out = append(out, safetensors.Tensor{Name: name, DType: "F32", Shape: tn.Shape, Data: b})
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), out, nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A llama.cpp-style file: a GGUF strata converted, rewritten with a mixed
// per-tensor assignment (experts q8_0 and iq4_nl, down in the other format
// per layer, the router f16, trunk matrices bf16 or q8_0, norms f32) and no
// strata.config. It loads from its qwen3next metadata, every role in the
// format the file holds (nothing quantized again: the bytes the engine gets
// are the file's), and its logits equal those of the HF checkpoint whose
// tensors went through the same formats, within fp32 rounding.
func TestGGUFLlamaMix(t *testing.T) {
	dir := t.TempDir()
	conv, _ := e2e.ConvertOracle(t, "tiny-a", "", dir)
	path := filepath.Join(dir, "mix.gguf")
	writeMix(t, conv, path, false, nil)
	ref := e2e.Ref(t, "tiny-a")
	opt := load.Options{AllLogits: true, PrefillRows: len(ref.Tokens)}
	l := e2e.GGUF(t, path, load.GGUFOptions{Options: opt})

	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Has(gguf.KeyConfig) {
		t.Fatal("the mixed file still has strata.config")
	}
	src, err := weights.NewGGUF(f, l.Config)
	if err != nil {
		t.Fatal(err)
	}
	// Each role runs in its tensor's own format; the bytes are the file's.
	specs := map[string]models.TensorSpec{}
	for _, s := range l.Config.Tensors() {
		specs[s.Name] = s
	}
	for role, tensor := range map[string]string{
		"embed": "token_embd.weight", "head": "output.weight", "layers.0.moe.router": "blk.0.ffn_gate_inp.weight",
		"layers.0.moe.experts.down": "blk.0.ffn_down_exps.weight", "layers.1.moe.experts.down": "blk.1.ffn_down_exps.weight",
		"layers.1.moe.experts.gate": "blk.1.ffn_gate_exps.weight", "layers.3.attn.k": "blk.3.attn_k.weight",
		"layers.0.moe.shared.up": "blk.0.ffn_up_shexp.weight",
	} {
		ti, ok := f.Tensor(tensor)
		if !ok {
			t.Fatalf("no tensor %s", tensor)
		}
		spec := specs[role]
		format := spec.Format(l.Config.Quant)
		if fc, _ := quant.ByCode(ti.Type.Code); fc == nil || fc.Name != format {
			t.Errorf("role %s runs as %s, its tensor %s is %s", role, format, tensor, ti.Type.Name)
			continue
		}
		if len(spec.Shape) == 3 {
			per := len(ti.Data) / spec.Shape[0]
			dst := make([]byte, per)
			for e := 0; e < spec.Shape[0]; e++ {
				if err := src.Read(spec, e, format, dst); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(dst, ti.Data[e*per:(e+1)*per]) {
					t.Fatalf("role %s expert %d: bytes differ from the file's", role, e)
				}
			}
			continue
		}
		off, size, ok := src.Mapped(spec, format)
		if !ok || off != f.DataOffset+ti.Offset || size != ti.Size {
			t.Errorf("role %s is not used in place from %s (%d, %d, %v)", role, tensor, off, size, ok)
		}
	}
	// Asked for another quantized format, the reader refuses.
	if _, err := src.WithFileFormats(l.Config); err != nil {
		t.Fatal(err)
	}
	k := specs["layers.3.attn.k"]
	buf := make([]byte, k.Rows()*mustQuant(t, "iq4_nl").Bytes(k.Shape[1]))
	if err := src.Read(k, -1, "iq4_nl", buf); err == nil || !strings.Contains(err.Error(), "would quantize it again") {
		t.Errorf("reading the q8_0 role layers.3.attn.k as iq4_nl: %v, want a refusal", err)
	}
	if st := l.Model.Weights(); st.InPlace == 0 {
		t.Errorf("nothing in place: %+v", st)
	}
	table := l.WeightTable()
	if got := load.ClassFormats(table, models.ClassExperts); !slices.Equal(got, []string{"iq4_nl", "q8_0"}) {
		t.Errorf("experts run as %v, want iq4_nl and q8_0", got)
	}
	if got := load.ClassFormats(table, models.ClassRouter); !slices.Equal(got, []string{"f16"}) {
		t.Errorf("routers run as %v, want f16", got)
	}
	for _, cw := range table {
		for _, fw := range cw.Formats {
			// Roles that are one tensor of the file are used in place; the
			// ones llama.cpp stores in another row order (GDN's qkvz and ba,
			// attention q with its gate) are copied in their format.
			whole := cw.Class == models.ClassEmbeddings || cw.Class == models.ClassRouter || cw.Class == models.ClassHead
			if whole && fw.InPlace != fw.Bytes || cw.Class == models.ClassTrunk && fw.InPlace == 0 {
				t.Errorf("%s %s: %d of %d bytes in place", cw.Class, fw.Format, fw.InPlace, fw.Bytes)
			}
		}
	}

	refDir := filepath.Join(dir, "decoded")
	if err := os.Mkdir(refDir, 0o755); err != nil {
		t.Fatal(err)
	}
	decodedCheckpoint(t, "tiny-a", refDir)
	hf, err := load.HF(refDir, e2e.WithGenerator(opt))
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	want := e2e.RunLogits(t, hf, ref.Tokens, len(ref.Tokens))
	got := e2e.RunLogits(t, l, ref.Tokens, len(ref.Tokens))
	var worst, fromOriginal float64
	for i := range want {
		worst = max(worst, e2e.RelL2(got[i], want[i]))
		fromOriginal = max(fromOriginal, e2e.RelL2(want[i], ref.Logits[i]))
	}
	if worst > 1e-5 {
		t.Errorf("logits vs the decoded HF checkpoint: worst relative L2 %.3g > 1e-5", worst)
	}
	if fromOriginal < 100*max(worst, 1e-7) {
		t.Errorf("the mix moves the logits by only %.3g from the unquantized model's: the comparison would not see a wrong format", fromOriginal)
	}
	// The same file with a stale strata.config (llama-quantize copies the f32
	// source's): the tensors still win. (The logits differ in the last bits
	// only: the metadata's rms epsilon is a float32, the config's 1e-6.)
	stale := filepath.Join(dir, "stale.gguf")
	writeMix(t, conv, stale, true, nil)
	ls := e2e.GGUF(t, stale, load.GGUFOptions{Options: opt})
	if a, b := ls.Config.Quant.Tensors.ByName, l.Config.Quant.Tensors.ByName; !maps.Equal(a, b) {
		t.Errorf("with the source's strata.config the roles run as %v, from the tensors %v", a, b)
	}
	for i, row := range e2e.RunLogits(t, ls, ref.Tokens, len(ref.Tokens)) {
		if e := e2e.RelL2(row, want[i]); e > 1e-5 {
			t.Fatalf("with the source's strata.config, position %d: relative L2 %.3g from the decoded HF checkpoint's", i, e)
		}
	}
	// The generated MSL (run on the CPU) decodes each tensor in its own
	// format too: per-tensor kernels, q8_0 and iq4_nl in one class.
	t.Run("mslemu", func(t *testing.T) {
		e2e.RequireEmulator(t)
		mopt := opt
		mopt.Backend = load.BackendMSLEmu
		lm := e2e.GGUF(t, path, load.GGUFOptions{Options: mopt})
		for i, row := range e2e.RunLogits(t, lm, ref.Tokens, len(ref.Tokens)) {
			if e := e2e.RelL2(row, want[i]); e > 1e-5 {
				t.Fatalf("mslemu, position %d: relative L2 %.3g from the decoded HF checkpoint's", i, e)
			}
		}
	})
	t.Logf("logits vs decoded HF: worst rel L2 %.3g (the mix moves them %.3g from the f32 model's); %d B in place\n%s", worst, fromOriginal, l.Model.Weights().InPlace, load.FormatWeightTable(table, false))
}

// A tensor of a ggml type strata has no decoder for is refused by name.
func TestGGUFUnsupportedType(t *testing.T) {
	dir := t.TempDir()
	conv, _ := e2e.ConvertOracle(t, "tiny-a", "", dir)
	path := filepath.Join(dir, "q8_1.gguf")
	writeMix(t, conv, path, false, map[string]int{"blk.1.ffn_down_exps.weight": 9}) // q8_1: ggml's activation type
	_, err := load.GGUF(path, load.GGUFOptions{Options: e2e.WithGenerator(load.Options{})})
	want := "tensor blk.1.ffn_down_exps.weight is ggml type q8_1 (9), which strata cannot decode"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want an error containing %q", err, want)
	}
}

// strata convert keeps the routers in f16 under a quantized trunk (as
// llama.cpp's mixes keep ffn_gate_inp) and the small tensors in f32.
func TestConvertRouterF16(t *testing.T) {
	path, _ := e2e.ConvertOracle(t, "tiny-a", "trunk=q8_0", t.TempDir())
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, want := range map[string]string{
		"blk.0.ffn_gate_inp.weight": "f16", "blk.3.ffn_gate_inp.weight": "f16", "blk.0.ssm_out.weight": "q8_0",
		"blk.0.attn_norm.weight": "f32", "blk.0.ssm_conv1d.weight": "f32", "blk.0.ffn_gate_inp_shexp.weight": "f32",
	} {
		ti, ok := f.Tensor(name)
		if !ok {
			t.Errorf("no tensor %s", name)
			continue
		}
		if got, _ := quant.ByCode(ti.Type.Code); got == nil || got.Name != want {
			t.Errorf("%s is %s, want %s", name, ti.Type.Name, want)
		}
	}
}

// wideRandomGGUF writes a random qwen3_next model (tiny-a's config at hidden
// size 256, so every row is whole 256-blocks) as an f32 GGUF with no
// strata.config, named name; it returns the folder and the file.
func wideRandomGGUF(t *testing.T, name string) (dir, src string) {
	t.Helper()
	data, err := os.ReadFile(e2e.Path("models", "tiny-a", "model.toml"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := models.Parse(data, e2e.Path("models", "tiny-a", "model.toml"))
	if err != nil {
		t.Fatal(err)
	}
	a := &c.Architecture
	a.HiddenSize, a.MoE.IntermediateSize, a.MoE.SharedExpertIntermediateSize = 256, 256, 256
	c.Name = name
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	src = filepath.Join(dir, "f32.gguf")
	if _, err := convert.Write(src, c, weights.NewRandom(7), convert.Options{}); err != nil {
		t.Fatal(err)
	}
	return dir, src
}

// decodedTwin writes beside mix the same file with every tensor rule
// quantized decoded to f32 by models/quant: the reference a mix runs against.
func decodedTwin(t *testing.T, mix string, rule func(name string, dims []uint64) string) string {
	t.Helper()
	dec := filepath.Join(filepath.Dir(mix), "decoded.gguf")
	writeMixRule(t, mix, dec, false, nil, func(name string, dims []uint64) string {
		if rule(name, dims) != "" {
			return "f32"
		}
		return ""
	})
	return dec
}

// The k-quants of a Q4_K_M-style mix (rows of 256 here): experts gate/up
// q4_k, down q6_k in even layers and q4_k in odd ones (so the layers' expert
// blocks take different page counts), router f16, trunk matrices q4_k, the
// embeddings q4_k and the head q6_k, on a random qwen3_next model at
// hidden size 256 with no strata.config. Its logits equal those of the same
// file with every tensor decoded to f32 by models/quant (the f32 kernels),
// with every expert resident and streamed through an arena from the pack.
func TestGGUFKQuantMix(t *testing.T) {
	dir, src := wideRandomGGUF(t, "kmix")
	rule := func(name string, dims []uint64) string {
		kind, layer := ggufKind(name, dims)
		if dims[0]%256 != 0 {
			return ""
		}
		switch kind {
		case "router", "shexp":
			return "f16"
		case "gate_up", "trunk", "embed":
			return "q4_k"
		case "down":
			return []string{"q6_k", "q4_k"}[layer%2]
		case "head":
			return "q6_k"
		}
		return ""
	}
	mix := filepath.Join(dir, "kmix.gguf")
	writeMixRule(t, src, mix, false, nil, rule)
	dec := decodedTwin(t, mix, rule)
	tokens := []int{5, 17, 300, 2, 99, 411, 64, 7, 250, 128, 33, 1}
	opt := load.Options{AllLogits: true, PrefillRows: 4}
	l := e2e.GGUF(t, mix, load.GGUFOptions{Options: opt})
	if got := load.ClassFormats(l.WeightTable(), models.ClassExperts); !slices.Equal(got, []string{"q4_k", "q6_k"}) {
		t.Fatalf("experts run as %v, want q4_k and q6_k", got)
	}
	want := e2e.RunLogits(t, e2e.GGUF(t, dec, load.GGUFOptions{Options: opt}), tokens, 4)
	got := e2e.RunLogits(t, l, tokens, 4)
	if err := e2e.PackFile(mix); err != nil {
		t.Fatal(err)
	}
	sopt := opt
	sopt.ArenaExperts, sopt.History = 20, "-" // of 64
	streamed := e2e.RunLogits(t, e2e.GGUF(t, mix, load.GGUFOptions{Options: sopt}), tokens, 4)
	orig := e2e.RunLogits(t, e2e.GGUF(t, src, load.GGUFOptions{Options: opt}), tokens, 4)
	var worst, moved float64
	for i := range want {
		for _, x := range want[i] {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("position %d: reference logit %v", i, x)
			}
		}
		worst = max(worst, e2e.RelL2(got[i], want[i]))
		moved = max(moved, e2e.RelL2(orig[i], want[i]))
		if !slices.Equal(streamed[i], got[i]) {
			t.Fatalf("position %d: streamed through the pack, logits differ from the resident run's (max |d| %.3g)", i, e2e.MaxAbs(streamed[i], got[i]))
		}
	}
	if worst > 1e-5 || math.IsNaN(worst) {
		t.Errorf("logits vs the f32-decoded file: worst relative L2 %.3g > 1e-5", worst)
	}
	if moved < 1e-3 {
		t.Errorf("the mix moves the logits only %.3g from the f32 model's: the comparison would not see a wrong format", moved)
	}
	t.Logf("k-quant mix: logits vs the f32-decoded file: worst rel L2 %.3g (the mix moves them %.3g from the f32 model's); streamed = resident\n%s", worst, moved, load.FormatWeightTable(l.WeightTable(), false))
}

// The config derived from a qwen3next file's metadata alone is the model's
// own (models/tiny-a/model.toml, imported from its HF config.json), up to the
// float32 the file keeps the rms epsilon and rope theta in.
func TestGGUFConfigFromMetadata(t *testing.T) {
	dir := t.TempDir()
	conv, _ := e2e.ConvertOracle(t, "tiny-a", "", dir)
	path := filepath.Join(dir, "bare.gguf")
	writeMix(t, conv, path, false, nil)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := weights.ConfigFromMetadata(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(e2e.Path("models", "tiny-a", "model.toml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := models.Parse(data, e2e.Path("models", "tiny-a", "model.toml"))
	if err != nil {
		t.Fatal(err)
	}
	ga, wa := got.Architecture, want.Architecture
	if math.Abs(ga.RMSNormEps-wa.RMSNormEps) > 1e-12 || ga.Attention.RopeTheta != wa.Attention.RopeTheta {
		t.Errorf("rms eps %v, rope theta %v; want %v, %v", ga.RMSNormEps, ga.Attention.RopeTheta, wa.RMSNormEps, wa.Attention.RopeTheta)
	}
	ga.RMSNormEps = wa.RMSNormEps
	wa.EOSTokenIDs = ga.EOSTokenIDs // tiny-a has no tokenizer: neither says
	if !reflect.DeepEqual(ga, wa) {
		t.Errorf("derived architecture\n%+v\nwant\n%+v", ga, wa)
	}
	if c := min(wa.Attention.MaxPositions, models.DefaultContextCap); got.Runtime.ContextLength != c {
		t.Errorf("runtime context %d, want %d (the import's default)", got.Runtime.ContextLength, c)
	}
}
