package load_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/weights"
)

// iqNoise writes len(src) elements of the decode-only format f (strata has
// no quantizer for the IQ formats a llama.cpp file may hold) as random
// blocks whose scale is set so each block's RMS matches src's: the file
// holds valid blocks of the format, and the test compares the engine
// against ggml-compatible decodes of those very bytes, not against src.
func iqNoise(t *testing.T, f *quant.Format, src []float32, dst []byte, rng *rand.Rand) {
	t.Helper()
	dec := make([]float32, f.BlockElems)
	for b := 0; b < len(src)/f.BlockElems; b++ {
		blk := dst[b*f.BlockBytes : (b+1)*f.BlockBytes]
		for i := range blk {
			blk[i] = byte(rng.Uint32())
		}
		var want float64
		for _, v := range src[b*f.BlockElems : (b+1)*f.BlockElems] {
			want += float64(v) * float64(v)
		}
		setIQScale(f, blk, 1)
		f.Decode(blk, dec)
		var got float64
		for _, v := range dec {
			got += float64(v) * float64(v)
		}
		d := float32(0)
		if got > 0 {
			d = float32(math.Sqrt(want / got))
		}
		setIQScale(f, blk, d)
	}
}

// setIQScale stores the block's f16 super-scale d (decode is linear in it):
// at byte 0, or for iq1_m in the top nibbles of its four u16 scales.
func setIQScale(f *quant.Format, blk []byte, d float32) {
	h := quant.F16(d)
	if f.Name != "iq1_m" {
		binary.LittleEndian.PutUint16(blk, h)
		return
	}
	for i := 0; i < 4; i++ {
		p := blk[48+2*i:]
		sc := binary.LittleEndian.Uint16(p)&0x0fff | (h>>(4*i)&0xf)<<12
		binary.LittleEndian.PutUint16(p, sc)
	}
}

// writeIQMix is writeMixRule for rules that may name decode-only formats.
func writeIQMix(t *testing.T, src, dst string, rule func(name string, dims []uint64) string) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var kv []gguf.KV
	for _, p := range f.KV {
		if !strings.HasPrefix(p.Key, "strata.") {
			kv = append(kv, p)
		}
	}
	rng := rand.New(rand.NewPCG(17, 4))
	var ts []gguf.Tensor
	for _, ti := range f.Tensors {
		tn, _ := f.Tensor(ti.Name)
		out := gguf.Tensor{TensorInfo: gguf.TensorInfo{Name: ti.Name, Dims: ti.Dims, Type: ti.Type}, Data: tn.Data}
		if name := rule(ti.Name, ti.Dims); name != "" {
			from, err := quant.ByCode(ti.Type.Code)
			if err != nil {
				t.Fatal(err)
			}
			to := mustQuant(t, name)
			v := make([]float32, ti.Elements())
			from.Decode(tn.Data, v)
			out.Data = make([]byte, to.Bytes(len(v)))
			if to.Encode != nil {
				to.Encode(v, out.Data)
			} else {
				iqNoise(t, to, v, out.Data, rng)
			}
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

// A llama.cpp-style file holding the six IQ formats strata decodes but does
// not quantize (iq2_xxs, iq3_xxs, iq2_s, iq3_s, iq1_s, iq1_m) in experts,
// trunk, embeddings and head runs them as stored, on cpu and mslemu: its
// logits equal those of the same file with every tensor decoded to f32 by
// models/quant (whose decoders equal ggml's, ggml_blocks_test.go). The GDN
// z (attn_gate) is q5_k beside an IQ attn_qkv: the split projections use
// both in place, each in its own format.
func TestGGUFIQMix(t *testing.T) {
	dir, src := wideRandomGGUF(t, "iqmix")
	rule := func(name string, dims []uint64) string {
		kind, layer := ggufKind(name, dims)
		if dims[0]%256 != 0 {
			return ""
		}
		switch kind {
		case "router":
			return "f16"
		case "shexp":
			return "iq3_s"
		case "gate_up":
			return []string{"iq2_xxs", "iq3_xxs"}[layer%2]
		case "down":
			return []string{"iq1_s", "iq1_m"}[layer%2]
		case "trunk":
			if strings.HasSuffix(name, ".attn_gate.weight") {
				return "q5_k" // the GDN z beside an IQ attn_qkv, as llama.cpp's mixes do
			}
			return []string{"iq2_s", "iq3_s"}[layer%2]
		case "embed":
			return "iq3_xxs"
		case "head":
			return "iq2_s"
		}
		return ""
	}
	mix := filepath.Join(dir, "iqmix.gguf")
	writeIQMix(t, src, mix, rule)
	dec := decodedTwin(t, mix, rule)
	tokens := []int{5, 17, 300, 2, 99, 411, 64, 7, 250, 128, 33, 1}
	opt := load.Options{AllLogits: true, PrefillRows: 4}
	l := e2e.GGUF(t, mix, load.GGUFOptions{Options: opt})
	if got := load.ClassFormats(l.WeightTable(), models.ClassExperts); !slices.Equal(got, []string{"iq1_m", "iq1_s", "iq2_xxs", "iq3_xxs"}) {
		t.Fatalf("experts run as %v, want iq1_m, iq1_s, iq2_xxs, iq3_xxs", got)
	}
	f, err := gguf.Open(mix)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := weights.NewGGUF(f, l.Config)
	if err != nil {
		t.Fatal(err)
	}
	specs := map[string]models.TensorSpec{}
	for _, s := range l.Config.Tensors() {
		specs[s.Name] = s
	}
	for role, tensor := range map[string]string{
		"layers.0.gdn.qkv": "blk.0.attn_qkv.weight", "layers.0.gdn.z": "blk.0.attn_gate.weight",
		"layers.1.gdn.qkv": "blk.1.attn_qkv.weight", "layers.1.gdn.z": "blk.1.attn_gate.weight",
	} {
		ti, ok := f.Tensor(tensor)
		spec, known := specs[role]
		if !ok || !known {
			t.Fatalf("no tensor %s or role %s", tensor, role)
		}
		format := spec.Format(l.Config.Quant)
		if fc, _ := quant.ByCode(ti.Type.Code); fc == nil || fc.Name != format {
			t.Errorf("role %s runs as %s, its tensor %s is %s", role, format, tensor, ti.Type.Name)
		}
		if off, size, ok := r.Mapped(spec, format); !ok || off != f.DataOffset+ti.Offset || size != ti.Size {
			t.Errorf("role %s is not used in place from %s", role, tensor)
		}
	}
	want := e2e.RunLogits(t, e2e.GGUF(t, dec, load.GGUFOptions{Options: opt}), tokens, 4)
	got := e2e.RunLogits(t, l, tokens, 4)
	var worst float64
	for i := range want {
		for _, x := range want[i] {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("position %d: reference logit %v", i, x)
			}
		}
		worst = max(worst, e2e.RelL2(got[i], want[i]))
	}
	if worst > 1e-5 || math.IsNaN(worst) {
		t.Errorf("cpu logits vs the f32-decoded file: worst relative L2 %.3g > 1e-5", worst)
	}
	t.Run("mslemu", func(t *testing.T) {
		e2e.RequireEmulator(t)
		mopt := opt
		mopt.Backend = load.BackendMSLEmu
		lm := e2e.GGUF(t, mix, load.GGUFOptions{Options: mopt})
		for i, row := range e2e.RunLogits(t, lm, tokens, 4) {
			if e := e2e.RelL2(row, want[i]); e > 1e-5 || math.IsNaN(e) {
				t.Fatalf("mslemu, position %d: relative L2 %.3g from the f32-decoded file's", i, e)
			}
		}
	})
	t.Logf("IQ mix: logits vs the f32-decoded file: worst rel L2 %.3g\n%s", worst, load.FormatWeightTable(l.WeightTable(), false))
}
