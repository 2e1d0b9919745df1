package convert_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/tools/convert"
	"github.com/strata-llm/strata/runtime/weights"
)

// Rows that are not whole blocks are written as llama-quantize v0.5.0 writes
// them (llama-quant.cpp's tensor_type_fallback), every tensor's ne[0] its
// real row length: q4-a (hidden 64, hyper-connection low rank 16) under
// all=q4_k stores its rows of 64 as q5_0 and its rows of 16 as f16, under
// all=q8_0 its rows of 16 as f16. A padded layout is refused by name.
func TestFallbackRowsAsLlamaQuantize(t *testing.T) {
	for _, c := range []struct {
		plan  string
		want  map[string]string // tensor → ggml type
		named []string          // in the report's fallback lines
	}{
		{"all=q4_k", map[string]string{"blk.0.ffn_down_shexp.weight": "q5_0", "blk.0.hc_attn_up.weight": "f16", "token_embd.weight": "q5_0"},
			[]string{"q4_k → q5_0", "q4_k → f16"}},
		{"all=q8_0", map[string]string{"blk.0.hc_attn_up.weight": "f16", "blk.0.ffn_down_shexp.weight": "q8_0"}, []string{"q8_0 → f16"}},
		{"all=q2_k", map[string]string{"blk.0.ffn_down_shexp.weight": "q4_0"}, []string{"q2_k → q4_0"}},
	} {
		t.Run(c.plan, func(t *testing.T) {
			path, rep := write(t, "q4-a", c.plan, convert.Options{})
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, ti := range f.Tensors {
				if n, ok := f.Uint(gguf.KeyRowLengthPrefix + ti.Name); ok == nil {
					t.Errorf("%s: %s%s = %d: a padded row", ti.Name, gguf.KeyRowLengthPrefix, ti.Name, n)
				}
				if ti.Dims[0]%uint64(ti.Type.BlockElems) != 0 {
					t.Errorf("%s: ne[0] = %d is not whole %s blocks", ti.Name, ti.Dims[0], ti.Type.Name)
				}
			}
			for name, typ := range c.want {
				ti, ok := f.Tensor(name)
				if !ok || ti.Type.Name != typ {
					t.Errorf("%s: %+v, want type %s", name, ti, typ)
				}
			}
			lines := strings.Join(convert.Fallbacks(rep.Fallbacks), "\n")
			for _, s := range c.named {
				if !strings.Contains(lines, s) {
					t.Errorf("fallback report %q does not name %q", lines, s)
				}
			}
		})
	}
	// rows=pad, asked for, pads (a strata-only file) and names what it padded.
	_, rep, err := tryWrite(t, "q4-a", "all=q8_0,rows=pad", convert.Options{})
	if err != nil || !slices.Contains(rep.Padded, "blk.0.hc_attn_up.weight (rows of 16 → 32 in q8_0)") {
		t.Errorf("rows=pad: %v; padded %q, want blk.0.hc_attn_up.weight named", err, rep.Padded)
	}
	if _, rep, err := tryWrite(t, "q4-a", "all=q8_0", convert.Options{}); err != nil || len(rep.Padded) != 0 {
		t.Errorf("the default rows=fallback: %v; padded %q, want none", err, rep.Padded)
	}
}

func write(t *testing.T, model, plan string, opt convert.Options) (string, *convert.Report) {
	t.Helper()
	path, rep, err := tryWrite(t, model, plan, opt)
	if err != nil {
		t.Fatal(err)
	}
	return path, rep
}

func tryWrite(t *testing.T, model, plan string, opt convert.Options) (string, *convert.Report, error) {
	t.Helper()
	c, err := models.Embedded(model)
	if err != nil {
		t.Fatal(err)
	}
	if c.Quant, err = convert.ParsePlan(c.Quant, plan); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	rep, err := convert.Write(path, c, weights.NewRandom(7), opt)
	return path, rep, err
}
