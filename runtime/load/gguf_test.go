package load_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/backend/cpu"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/format/pack"
	"github.com/strata-llm/strata/runtime/format/safetensors"
	"github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/tools/convert"
	"github.com/strata-llm/strata/runtime/weights"
)

// gap is the reference's margin between its best and second-best logit.
func gap(ref []float32) float64 {
	best := engine.Argmax(ref)
	second := math.Inf(-1)
	for i, v := range ref {
		if i != best {
			second = math.Max(second, float64(v))
		}
	}
	return float64(ref[best]) - second
}

// ggufCase is one oracle converted with one plan, with the bounds its logits
// must meet against the float64 reference (worst per-position relative L2).
// The tiny oracles are random-weight models that amplify weight error
// strongly (a gated norm sees inputs of mean square 1e-7): f32 rounding gives
// 5e-6, f16 weights already 0.08, so the quantized bounds are wide, but a
// layout or kernel bug gives errors near 1 and breaks the agreement checks.
type ggufCase struct {
	oracle, plan string
	bound        float64 // 0: must equal the HF path's logits bit for bit
}

var ggufCases = []ggufCase{
	{"tiny-a", "", 0},
	{"tiny-k512", "", 0},
	{"tiny-a", "trunk=q8_0", 0.75},
	{"tiny-k512", "trunk=q8_0", 0.5},
	{"tiny-a", "experts=iq2_xs", 1.1},          // rows of 64 and 32: iq4_nl fallback, the smaller
	{"tiny-a", "experts=iq2_xs,rows=pad", 1.6}, // really iq2_xs, rows padded to 256
	{"tiny-k512", "experts=iq2_xs", 0.55},
	{"tiny-a", "experts=iq2_xs,trunk=q8_0,embed=q8_0,head=q6_k", 1.2},
	{"tiny-a", "trunk=q4_k,embed=iq4_xs,head=q6_k,rows=pad", 1.6},   // the 256-block formats, padded
	{"tiny-a", "trunk=q5_k,experts=q5_0,embed=q5_1,head=q4_1", 1.5}, // formats llama.cpp's mixes add (1.23 measured)
	{"tiny-a", "trunk=q3_k,experts=q4_0,head=q2_k,rows=pad", 1.8},   // (1.48)
	// q4-a (qwen4exp): its ssm_out columns move in value heads of 16, which
	// straddle q8_0 blocks, so that role runs decoded to f32 (never
	// quantized again at load).
	{"q4-a", "", 0},
	{"q4-a", "trunk=q8_0", 0.5},
	{"q4-a", "experts=iq2_xs", 0.85}, // iq4_nl: rows of 64 and 32
	{"q4-a", "embed=q8_0", 0.7},      // the n-gram table too
	{"q4-a", "experts=iq2_xs,trunk=q8_0,embed=q8_0,head=q6_k", 0.5},
	{"q4-a", "experts=iq2_xs,trunk=q8_0,rows=pad", 1.2},
}

// TestGGUFOracles converts the oracles with several quant plans and runs the
// GGUF files. Passthrough plans reproduce the HF path's logits bit for bit;
// quantized ones stay within their bounds of the float64 reference, agree
// with it on the argmax wherever the reference's margin exceeds twice the
// error, decode the reference greedy continuation when the error is below
// half of reference.json's min_greedy_margin, and match the same weights
// decoded to f32 (so the quantized kernels compute what the blocks hold).
func TestGGUFOracles(t *testing.T) {
	for _, c := range ggufCases {
		t.Run(c.oracle+"/"+c.plan, func(t *testing.T) {
			start := time.Now()
			path, rep := e2e.ConvertOracle(t, c.oracle, c.plan, t.TempDir())
			ref := e2e.Ref(t, c.oracle)
			opt := load.Options{AllLogits: true, PrefillRows: len(ref.Tokens)}
			l := e2e.GGUF(t, path, load.GGUFOptions{Options: opt})
			got := e2e.RunLogits(t, l, ref.Tokens, len(ref.Tokens))
			greedyLogits := e2e.RunLogits(t, l, ref.Greedy, len(ref.Greedy))
			if c.bound == 0 {
				hf, _ := e2e.OpenOracle(t, c.oracle, opt)
				want := e2e.RunLogits(t, hf, ref.Tokens, len(ref.Tokens))
				// Again with the routed experts read through the pack.
				if err := e2e.PackFile(path); err != nil {
					t.Fatal(err)
				}
				packed := e2e.RunLogits(t, e2e.GGUF(t, path, load.GGUFOptions{Options: opt}), ref.Tokens, len(ref.Tokens))
				for i := range want {
					if !slices.Equal(got[i], want[i]) || !slices.Equal(packed[i], want[i]) {
						t.Fatalf("position %d: GGUF logits differ from the HF path's (max |d| %.3g, through the pack %.3g)", i, e2e.MaxAbs(got[i], want[i]), e2e.MaxAbs(packed[i], want[i]))
					}
				}
				t.Logf("%s passthrough (%s): logits equal the HF path's bit for bit, with and without the pack; %v", c.oracle, convert.String(l.Config.Quant), time.Since(start).Round(time.Millisecond))
				return
			}
			var worst, sum, worstAbs float64
			agree, checked := 0, 0
			for i := range ref.Logits {
				e := e2e.RelL2(got[i], ref.Logits[i])
				worst, sum = math.Max(worst, e), sum+e
				d := e2e.MaxAbs(got[i], ref.Logits[i])
				if gap(ref.Logits[i]) > 2*d {
					checked++
					if engine.Argmax(got[i]) != engine.Argmax(ref.Logits[i]) {
						t.Errorf("position %d: argmax %d, reference %d, though the margin %.3g exceeds twice the error %.3g", i, engine.Argmax(got[i]), engine.Argmax(ref.Logits[i]), gap(ref.Logits[i]), d)
					}
				}
				if engine.Argmax(got[i]) == engine.Argmax(ref.Logits[i]) {
					agree++
				}
			}
			for i := range greedyLogits {
				worstAbs = math.Max(worstAbs, e2e.MaxAbs(greedyLogits[i], ref.GreedyLogits[i]))
			}
			if worst > c.bound {
				t.Errorf("worst relative L2 error %.3g > bound %.3g", worst, c.bound)
			}
			margin := referenceMargin(t, c.oracle)
			s := l.Model.NewSession()
			out, err := s.Generate(ref.Greedy[:16], len(ref.Greedy)-16, engine.GenerateOptions{PrefillRows: l.PrefillRows})
			if err != nil {
				t.Fatal(err)
			}
			same := 0
			for same < len(out) && out[same] == ref.Greedy[16+same] {
				same++
			}
			if worstAbs < margin/2 && same != len(out) {
				t.Errorf("greedy path error %.3g < half the margin %.3g, yet the greedy decode leaves the reference at token %d", worstAbs, margin, same)
			}
			werr := weightErrors(t, path, c.oracle)
			// The weights the quantized run got, decoded to f32, run through
			// the f32 kernels.
			dec := decodedRun(t, path, l.Config, opt)
			var kernelErr float64
			for i, r := range e2e.RunLogits(t, dec, ref.Tokens, len(ref.Tokens)) {
				kernelErr = math.Max(kernelErr, e2e.RelL2(got[i], r))
			}
			if kernelErr > 2e-3 {
				t.Errorf("quantized kernels vs the decoded weights in f32: relative L2 %.3g > 2e-3", kernelErr)
			}
			t.Logf("%s %s: %s of tensors, %d B per expert; weights rel RMS error %v; logits vs float64 reference: worst rel L2 %.3g, mean %.3g; argmax %d/%d (%d checked by margin); greedy: %d/%d tokens (path error %.3g, margin %.3g); vs decoded f32 %.2g; %v",
				c.oracle, c.plan, sizeOf(rep.Bytes), rep.ExpertBytes, werr, worst, sum/float64(len(ref.Logits)), agree, len(ref.Logits), checked, same, len(out), worstAbs, margin, kernelErr, time.Since(start).Round(time.Millisecond))
		})
	}
}

// asPlanned serves the weights exactly as a GGUF source hands them to the
// engine under plan (quantized again where the file's blocks cannot be
// moved as they are), decoded to whatever format is asked.
type asPlanned struct {
	*weights.GGUF
	plan models.QuantPlan
}

func (s asPlanned) Read(spec models.TensorSpec, index int, format string, dst []byte) error {
	rl, err := spec.Layout(s.plan)
	if err != nil {
		return err
	}
	to, err := spec.Layout(models.QuantPlan{Trunk: format, Experts: format, Embeddings: format, Head: format})
	if err != nil {
		return err
	}
	rows := len(dst) / to.RowBytes()
	b := make([]byte, rows*rl.RowBytes())
	if err := s.GGUF.Read(spec, index, rl.Format.Name, b); err != nil {
		return err
	}
	return weights.TranscodeRows(b, rl, dst, to, rows, nil)
}

// decodedRun loads the GGUF at path as the quantized model cfg received its
// weights, decoded to f32 and run through the f32 kernels.
func decodedRun(t *testing.T, path string, cfg *models.Config, opt load.Options) *load.Loaded {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	g, err := weights.NewGGUF(f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p := pack.Path(path); fileExists(p) {
		r, err := pack.Open(p, f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		g.UsePack(r)
	}
	dc := *cfg
	dc.Quant = models.QuantPlan{Trunk: "f32", Experts: "f32", Embeddings: "f32", Head: "f32"}
	graphs, err := gen.Windows(&dc, opt.AllLogits, opt.PrefillRows)
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.LoadWith(&dc, graphs, asPlanned{g, cfg.Quant}, cpu.Backend)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return &load.Loaded{Config: &dc, Model: m, PrefillRows: opt.PrefillRows}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// referenceMargin is reference.json's min_greedy_margin: the least gap
// between the best and second-best logit along the reference greedy path.
func referenceMargin(t *testing.T, oracle string) float64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../testdata/oracles", oracle, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Margin float64 `json:"min_greedy_margin"`
	}
	if err := json.Unmarshal(data, &r); err != nil || r.Margin <= 0 {
		t.Fatalf("%s/reference.json: min_greedy_margin: %v", oracle, err)
	}
	return r.Margin
}

func sizeOf(n int64) string { return fmt.Sprintf("%.3g MB", float64(n)/1e6) }

// tensorInfoAt finds the byte offset of a tensor info's type field in a GGUF
// header (its offset field follows it).
func tensorInfoAt(t *testing.T, b []byte, f *gguf.File, name string) int {
	t.Helper()
	key := binary.LittleEndian.AppendUint64(nil, uint64(len(name)))
	key = append(key, name...)
	p := bytes.Index(b[:f.DataOffset], key)
	if p < 0 {
		t.Fatalf("no tensor info %s", name)
	}
	p += len(key)
	nd := int(binary.LittleEndian.Uint32(b[p:]))
	return p + 4 + 8*nd
}

// TestGGUFCorrupt: broken files and stale or corrupt packs are refused with
// errors that say what is wrong.
func TestGGUFCorrupt(t *testing.T) {
	dir := t.TempDir()
	good, _ := e2e.ConvertOracle(t, "tiny-a", "experts=iq2_xs", dir) // iq4_nl experts: 32-element blocks of 18 bytes
	orig, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(good)
	if err != nil {
		t.Fatal(err)
	}
	gate, _ := f.Tensor("blk.0.ffn_gate_exps.weight")
	gateInfo := gate.TensorInfo
	dataOff := f.DataOffset
	last := f.Tensors[len(f.Tensors)-1].Name
	typeAt := tensorInfoAt(t, orig, f, gate.Name)
	lastAt := tensorInfoAt(t, orig, f, last)
	f.Close()
	if gateInfo.Type.Name != "iq4_nl" {
		t.Fatalf("expected iq4_nl experts, got %s", gateInfo.Type.Name)
	}
	variant := func(name string, edit func([]byte) []byte) string {
		p := filepath.Join(dir, name+".gguf")
		if err := os.WriteFile(p, edit(slices.Clone(orig)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, want string
		edit       func([]byte) []byte
	}{
		{"bad-magic", "bad magic", func(b []byte) []byte { copy(b, "GGUX"); return b }},
		{"truncated", "truncated", func(b []byte) []byte { return b[:len(b)-100] }},
		{"misaligned", "not a multiple of the alignment", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[lastAt+4:], binary.LittleEndian.Uint64(b[lastAt+4:])+1)
			return b
		}},
		// mxfp4 has 32-element blocks (of 17 bytes) but no codec here.
		{"no-codec", "ggml type mxfp4 (39), which strata cannot decode", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[typeAt:], 39)
			return b
		}},
		{"unknown-type", "ggml type", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[typeAt:], 99); return b }},
	} {
		_, err := load.GGUF(variant(c.name, c.edit), load.GGUFOptions{Options: e2e.WithGenerator(load.Options{})})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}

	// Packs: written for good, then good changes under them.
	if err := e2e.PackFile(good); err != nil {
		t.Fatal(err)
	}
	packBytes, err := os.ReadFile(pack.Path(good))
	if err != nil {
		t.Fatal(err)
	}
	gateAt := int(dataOff + gateInfo.Offset)
	withPack := func(name string, gg, pk []byte) string {
		p := filepath.Join(dir, name+".gguf")
		if err := os.WriteFile(p, gg, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(pack.Path(p), pk, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flip := func(b []byte, at int) []byte { b = slices.Clone(b); b[at] ^= 0x40; return b }
	// A re-conversion with another plan: everything differs.
	requant, _ := e2e.ConvertOracle(t, "tiny-a", "experts=q8_0", t.TempDir())
	requantBytes, err := os.ReadFile(requant)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, want string
		stale      bool
		gg, pk     []byte
	}{
		{"reconverted", "rebuild it with `strata pack", true, requantBytes, packBytes},
		// One expert weight at a sampled place (the start of a tensor).
		{"edited-weights", "its expert weights changed", true, flip(orig, gateAt+3), packBytes},
		{"corrupt-entry", "fails its checksum", false, orig, flip(packBytes, pack.PageSize+5)},
		{"corrupt-index", "index checksum mismatch", false, orig, flip(packBytes, len(packBytes)-3)},
		{"truncated-pack", "past the end", false, orig, packBytes[:len(packBytes)-pack.PageSize]},
		{"not-a-pack", "not a strata expert pack", false, orig, append([]byte("NOTAPACK"), packBytes[8:]...)},
	} {
		_, err := load.GGUF(withPack(c.name, c.gg, c.pk), load.GGUFOptions{Options: e2e.WithGenerator(load.Options{})})
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, pack.ErrStale) != c.stale {
			t.Errorf("%s: error %v, want one saying %q (stale %v)", c.name, err, c.want, c.stale)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
	// An edit inside one expert, away from the sampled bytes, passes the
	// cheap check at open; the full check (strata pack --verify) sees it.
	p := withPack("edited-middle", flip(orig, gateAt+int(gateInfo.Size)/4+7), packBytes)
	g, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	r, err := pack.Open(pack.Path(p), g)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer r.Close()
	if err := r.Check(g, nil); !errors.Is(err, pack.ErrStale) {
		t.Errorf("full check of a pack whose GGUF changed inside an expert: %v, want ErrStale", err)
	}
}

// formatError bounds the relative RMS error of a format's round trip on
// these weights (models/quant measures 0.0053 for q8_0 … 0.29 for iq2_xs on
// N(0,1) data; small tensors and padded rows fare a little worse).
var formatError = map[string]float64{"f32": 0, "bf16": 0, "f16": 1e-3, "q8_0": 0.01, "q6_k": 0.03, "q4_k": 0.1, "iq4_nl": 0.1, "iq4_xs": 0.1, "iq2_xs": 0.4,
	"q5_k": 0.05, "q5_1": 0.05, "q5_0": 0.06, "q4_1": 0.1, "q4_0": 0.11, "q3_k": 0.19, "q2_k": 0.36}

// weightErrors compares every role read back from the GGUF with the HF
// checkpoint's values, checks each against its format's bound, and returns
// the relative RMS error per tensor class.
func weightErrors(t *testing.T, path, oracle string) map[string]string {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := weights.ConfigOf(f)
	if err != nil {
		t.Fatal(err)
	}
	g, err := weights.NewGGUF(f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.OpenDir(filepath.Join("../../testdata/oracles", oracle))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	hf := weights.NewHF(ck, cfg)
	read := func(src engine.WeightSource, s models.TensorSpec) []float32 {
		b := make([]byte, 4*s.Elements())
		if err := src.Read(s, -1, "f32", b); err != nil {
			t.Fatal(err)
		}
		v := make([]float32, s.Elements())
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return v
	}
	// The n-gram table is gathered row by row, never read whole.
	gather := func(src engine.NgramSource, s models.TensorSpec) []float32 {
		tab, err := src.NgramTable(s)
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]int64, tab.Rows())
		for i := range ids {
			ids[i] = int64(i)
		}
		v := make([]float32, len(ids)*tab.Width())
		if err := tab.Gather(ids, v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	num, den := map[string]float64{}, map[string]float64{}
	for _, s := range cfg.Tensors() {
		ls := s
		if s.Host() {
			ls.Class = models.ClassEmbeddings // as convert plans it
		}
		rl, err := ls.Layout(cfg.Quant)
		if err != nil {
			t.Fatal(err)
		}
		var a, b []float32
		if s.Host() {
			a, b = gather(g, s), gather(hf, s)
		} else {
			a, b = read(g, s), read(hf, s)
		}
		var d, n float64
		for i := range b {
			d += (float64(a[i]) - float64(b[i])) * (float64(a[i]) - float64(b[i]))
			n += float64(b[i]) * float64(b[i])
		}
		if e := math.Sqrt(d / n); e > formatError[rl.Format.Name] {
			t.Errorf("role %s (%s): relative RMS error %.3g > %.3g", s.Name, rl.Format.Name, e, formatError[rl.Format.Name])
		}
		num[s.Class] += d
		den[s.Class] += n
	}
	out := map[string]string{}
	for c := range num {
		out[c] = fmt.Sprintf("%.3g", math.Sqrt(num[c]/den[c]))
	}
	return out
}

// TestExpertBytesRealModels: the experts buffer of the real models' window
// graphs under IQ2_XS experts, per row policy: one expert's gate, up and down
// (the unit that streams, rounded up to 16 KiB pages: an arena slot and a
// pack entry) and where Flash-Next's 640-wide down rows went. The payloads
// are 1,515,520 / 1,868,800 / 909,312 bytes.
func TestExpertBytesRealModels(t *testing.T) {
	for _, c := range []struct {
		model, rows string
		stride      int64
		down        string
	}{
		{"qwen38-flash-next", "", 1884160, "iq4_nl"},                       // the default: llama-quantize's fallback
		{"qwen38-flash-next", "smallest", 1523712, "iq2_xs padded to 768"}, // padding beats iq4_nl
		{"qwen38-flash-next", "pad", 1523712, "iq2_xs padded to 768"},
		{"qwen38-flash-next", "fallback", 1884160, "iq4_nl"},
		{"qwen3-next-80b-a3b", "", 917504, "iq2_xs"},
	} {
		cfg, err := models.Embedded(c.model)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Quant.Experts, cfg.Quant.Rows = "iq2_xs", c.rows
		g, err := gen.Window(cfg, 1, gen.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range g.Tensors {
			if tt.Name != "layers.0.moe.experts.down" {
				continue
			}
			down := tt.Format
			if tt.Stored > 0 {
				down = fmt.Sprintf("%s padded to %d", tt.Format, tt.Stored)
			}
			if tt.Stride != c.stride || down != c.down {
				t.Errorf("%s rows=%q: %d B per expert, down %s; want %d B, down %s", c.model, c.rows, tt.Stride, down, c.stride, c.down)
			}
			t.Logf("%s, experts=iq2_xs, rows=%q: %d B per expert (down %s)", c.model, c.rows, tt.Stride, down)
		}
	}
}

// f32Tensor reads a float32 tensor of a GGUF file.
func f32Tensor(t *testing.T, f *gguf.File, name string) []float32 {
	t.Helper()
	tt, ok := f.Tensor(name)
	if !ok || tt.Type.Name != "f32" {
		t.Fatalf("gguf has no f32 tensor %s", name)
	}
	v := make([]float32, len(tt.Data)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(tt.Data[4*i:]))
	}
	return v
}

// TestQwen4ExpLayout checks the bytes of a passthrough q4-a GGUF against the
// checkpoint's tensors, with the layout written out by hand from llama.cpp's
// qwen4exp conventions (not from our name map): value heads tiled (GGUF head
// r·nk + k is HF head k·rep + r; q4-a has nk = 2, rep = 3, so the file holds
// HF heads 0,3,1,4,2,5), zero-centred norms +1, ssm_a = −exp(A_log), the
// indexer split into q_proj and k_proj, the n-gram shards as one table and
// the hash parameters as int64 metadata.
func TestQwen4ExpLayout(t *testing.T) {
	path, _ := e2e.ConvertOracle(t, "q4-a", "", t.TempDir())
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ck, err := safetensors.OpenDir("../../testdata/oracles/q4-a")
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	hf := func(name string) []float32 {
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
	if arch, _ := f.String("general.architecture"); arch != "qwen4exp" {
		t.Errorf("general.architecture %q", arch)
	}
	heads := []int{0, 3, 1, 4, 2, 5} // HF head at each GGUF position
	const dv, qk, H = 16, 64, 64     // value head dim, q+k rows of in_proj_qkv, hidden
	for _, l := range []int{0, 1, 2} {
		hp, gp := fmt.Sprintf("model.layers.%d.linear_attn.", l), fmt.Sprintf("blk.%d.", l)
		aLog, ssmA := hf(hp+"A_log"), f32Tensor(t, f, gp+"ssm_a")
		dt, ssmDt := hf(hp+"dt_bias"), f32Tensor(t, f, gp+"ssm_dt.bias")
		beta, ssmBeta := hf(hp+"in_proj_b.weight"), f32Tensor(t, f, gp+"ssm_beta.weight")
		qkv, attnQKV := hf(hp+"in_proj_qkv.weight"), f32Tensor(t, f, gp+"attn_qkv.weight")
		z, gate := hf(hp+"in_proj_z.weight"), f32Tensor(t, f, gp+"attn_gate.weight")
		out, ssmOut := hf(hp+"out_proj.weight"), f32Tensor(t, f, gp+"ssm_out.weight")
		if !slices.Equal(attnQKV[:qk*H], qkv[:qk*H]) {
			t.Errorf("layer %d: attn_qkv q and k rows differ from in_proj_qkv's", l)
		}
		for g, h := range heads {
			if ssmA[g] != float32(-math.Exp(float64(aLog[h]))) || ssmDt[g] != dt[h] {
				t.Errorf("layer %d: ssm_a/ssm_dt.bias[%d] = %v/%v, want −exp(A_log[%d])/dt_bias[%d]", l, g, ssmA[g], ssmDt[g], h, h)
			}
			if !slices.Equal(ssmBeta[g*H:(g+1)*H], beta[h*H:(h+1)*H]) {
				t.Errorf("layer %d: ssm_beta row %d is not in_proj_b row %d", l, g, h)
			}
			v := func(m []float32, base, head int) []float32 { return m[(base+head*dv)*H : (base+(head+1)*dv)*H] }
			if !slices.Equal(v(attnQKV, qk, g), v(qkv, qk, h)) || !slices.Equal(v(gate, 0, g), v(z, 0, h)) {
				t.Errorf("layer %d: attn_qkv/attn_gate value head %d is not HF head %d", l, g, h)
			}
			for row := 0; row < H; row++ {
				if !slices.Equal(ssmOut[row*96+g*dv:row*96+(g+1)*dv], out[row*96+h*dv:row*96+(h+1)*dv]) {
					t.Fatalf("layer %d: ssm_out row %d, columns of head %d are not out_proj's of head %d", l, row, g, h)
				}
			}
		}
		norm, hcNorm := hf(fmt.Sprintf("model.layers.%d.attn_hyper_connection.hc_norm.weight", l)), f32Tensor(t, f, gp+"hc_attn_norm.weight")
		for i := range norm {
			if hcNorm[i] != 1+norm[i] {
				t.Fatalf("layer %d: hc_attn_norm[%d] = %v, want 1 + %v", l, i, hcNorm[i], norm[i])
			}
		}
	}
	ix := hf("model.layers.3.self_attn.indexer.index_qk_proj.weight")
	if q, k := f32Tensor(t, f, "blk.3.indexer.q_proj.weight"), f32Tensor(t, f, "blk.3.indexer.k_proj.weight"); !slices.Equal(q, ix[:64*H]) || !slices.Equal(k, ix[64*H:]) {
		t.Errorf("indexer.q_proj/k_proj are not index_qk_proj's rows 0–63 and 64–79")
	}
	table := append(hf("model.layers.1.ple.ple_embedding.ngram_embedding.shard_0.weight"), hf("model.layers.1.ple.ple_embedding.ngram_embedding.shard_1.weight")...)
	if got := f32Tensor(t, f, "per_layer_token_embd.weight"); !slices.Equal(got, table) {
		t.Errorf("per_layer_token_embd is not the two shards concatenated")
	}
	for key, want := range map[string][]int64{
		"qwen4exp.ple.layer_multipliers":     {4295158889763781, 17440218147737327, 1270917961434445}, // qwen4_exp.md §1
		"qwen4exp.ple.head_vocab_sizes":      {1009, 1013, 1019, 1021},
		"qwen4exp.ple.head_offsets":          {0, 1009, 2022, 3041},
		"qwen4exp.ple.layers":                {1},
		"qwen4exp.attention.compress_ratios": {0, 0, 0, 4},
	} {
		if got, err := f.Ints(key); err != nil || !slices.Equal(got, want) {
			t.Errorf("%s = %v (%v), want %v", key, got, err, want)
		}
	}
}

// TestQwen4ExpGGUFCorrupt: a qwen4exp file without its n-gram table, with
// other hash parameters than the config's, without them, or from a newer
// name map is refused, saying what is wrong.
func TestQwen4ExpGGUFCorrupt(t *testing.T) {
	dir := t.TempDir()
	good, _ := e2e.ConvertOracle(t, "q4-a", "", dir)
	orig, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(good)
	if err != nil {
		t.Fatal(err)
	}
	header := int(f.DataOffset)
	f.Close()
	// replace edits the header: old must occur exactly once there.
	replace := func(b []byte, old, new []byte) []byte {
		t.Helper()
		if bytes.Count(b[:header], old) != 1 {
			t.Fatalf("%q occurs %d times in the header", old, bytes.Count(b[:header], old))
		}
		b = slices.Clone(b)
		copy(b[bytes.Index(b[:header], old):], new)
		return b
	}
	i64 := func(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }
	names := []byte(gguf.KeyQwen4ExpNames)
	namesAt := bytes.Index(orig[:header], names) + len(names) + 4 // after the key and the type tag
	for _, c := range []struct {
		name, want string
		data       []byte
	}{
		{"no-table", "has no tensor per_layer_token_embd.weight (role layers.1.ple.table)",
			replace(orig, []byte("per_layer_token_embd.weight"), []byte("per_layer_token_embX.weight"))},
		{"other-multiplier", "layer 1's stored qwen4exp.ple.layer_multipliers [4295158889763783 17440218147737327 1270917961434445] differ from the ones computed from the config",
			replace(orig, i64(4295158889763781), i64(4295158889763783))},
		{"other-offset", "stored qwen4exp.ple.head_offsets [0 1009 2023 3041] differ",
			replace(orig, i64(2022), i64(2023))},
		{"no-multipliers", "metadata key qwen4exp.ple.layer_multipliers missing",
			replace(orig, []byte("qwen4exp.ple.layer_multipliers"), []byte("qwen4exp.ple.layer_multipliery"))},
		{"newer-names", "strata.qwen4exp_names = 2", func() []byte {
			b := slices.Clone(orig)
			binary.LittleEndian.PutUint32(b[namesAt:], 2)
			return b
		}()},
	} {
		p := filepath.Join(dir, c.name+".gguf")
		if err := os.WriteFile(p, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := load.GGUF(p, load.GGUFOptions{Options: e2e.WithGenerator(load.Options{})})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
	// A config that disagrees with the file's hyperparameters.
	g, err := gguf.Open(good)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := weights.ConfigOf(g)
	g.Close()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Architecture.EOSTokenIDs = []int{5}
	cfg.Architecture.HyperConnections.LowRank = 8
	_, err = load.GGUF(good, load.GGUFOptions{Options: e2e.WithGenerator(load.Options{}), Config: cfg})
	for _, want := range []string{"qwen4exp.ple.eos_token_id = 3, but the model config says 5", "qwen4exp.hyper_connection.low_rank = 16, but the model config says 8"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("other config: error %v, want one saying %q", err, want)
		}
	}
}
