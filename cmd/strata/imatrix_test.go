package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/tools/imatrix"
)

// TestImatrixConvert: strata imatrix on tiny-go writes both file formats
// with the same statistics under llama.cpp's names, every window's tokens
// counted once per plain weight and top_k (4) times over a layer's experts;
// convert refuses iq2_xs without a matrix, and with one weights the experts.
func TestImatrixConvert(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "calib.go")
	src := strings.Repeat("func add(a, b int) int {\n\treturn a + b\n}\n\nfor i := 0; i < n; i++ {\n\ts += add(i, 1)\n}\n", 20)
	if err := os.WriteFile(text, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ggufOut, datOut := filepath.Join(dir, "m.imatrix"), filepath.Join(dir, "m.dat")
	for _, out := range []string{ggufOut, datOut} {
		if _, stderr, status := runStrata(t, "imatrix", "--hf", tinyGo, "--ctx", "64", "--chunks", "2", "-f", text, "-o", out); status != 0 {
			t.Fatalf("imatrix -o %s: status %d: %s", out, status, stderr)
		}
	}
	g, err := imatrix.Read(ggufOut)
	if err != nil {
		t.Fatal(err)
	}
	d, err := imatrix.Read(datOut)
	if err != nil {
		t.Fatal(err)
	}
	if g.ChunkCount != 2 || g.ChunkSize != 64 || !slices.Equal(g.Names(), d.Names()) {
		t.Fatalf("chunks %d × %d; names %d (gguf) vs %d (dat)", g.ChunkCount, g.ChunkSize, len(g.Names()), len(d.Names()))
	}
	if e := g.Entries["blk.0.attn_qkv.weight"]; e == nil || e.Cols != 256 || !slices.Equal(e.Counts, []float32{128}) {
		t.Errorf("blk.0.attn_qkv.weight: %+v, want 256 columns and 128 rows", e)
	}
	exps := g.Entries["blk.2.ffn_down_exps.weight"]
	if exps == nil || exps.NMat() != 32 || exps.Cols != 16 {
		t.Fatalf("blk.2.ffn_down_exps.weight: %+v, want 32 experts of 16 columns", exps)
	}
	var routed float32
	for _, c := range exps.Counts {
		routed += c
	}
	if routed != 128*4 {
		t.Errorf("rows routed to layer 2's experts: %v, want 128 tokens × top_k 4", routed)
	}
	if err := d.Entries["blk.2.ffn_down_exps.weight"].SplitExperts("down", 16); err != nil {
		t.Fatal(err)
	}
	for e := range 32 {
		wg, _ := g.Weights("blk.2.ffn_down_exps.weight", e)
		wd, _ := d.Weights("blk.2.ffn_down_exps.weight", e)
		for i := range wg {
			if diff := wg[i] - wd[i]; diff > 1e-6*wg[i] || diff < -1e-6*wg[i] {
				t.Fatalf("expert %d column %d: %v in the GGUF file, %v in the .dat", e, i, wg[i], wd[i])
			}
		}
	}

	out := filepath.Join(dir, "iq2.gguf")
	plan := []string{"convert", "--hf", tinyGo, "--quant", "all=q8_0,experts=iq2_xs", "-o", out}
	if _, stderr, status := runStrata(t, plan...); status == 0 || !strings.Contains(stderr, "--allow-no-imatrix") {
		t.Errorf("iq2_xs without an imatrix: status %d, %q; want a refusal naming --allow-no-imatrix", status, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("the refused conversion wrote its output")
	}
	stdout, stderr, status := runStrata(t, append(plan, "--imatrix", datOut)...)
	// The 16-wide downs fall back to f16 (llama.cpp's fallback), unweighted.
	if status != 0 || !strings.Contains(stdout, "imatrix: 18 tensors quantized with importance weights") {
		t.Errorf("convert --imatrix: status %d, %q %s; want the 9 layers' gate and up weighted", status, stdout, stderr)
	}
	allowed := func(stderr string, status int) {
		t.Helper()
		if status != 0 || !strings.Contains(stderr, "without an importance matrix") {
			t.Errorf("--allow-no-imatrix: status %d, %q; want a warning", status, stderr)
		}
	}
	if testing.Short() {
		_, stderr, status := runStrata(t, append(plan, "--allow-no-imatrix")...)
		allowed(stderr, status)
		return
	}
	// An imatrix of ones changes nothing in iq2_xs (its own weights are
	// multiplied by them): the weighted path (experts by index, tensors
	// split by rows, value-head columns reordered) writes the same bytes as
	// the plain one.
	for _, e := range g.Entries {
		copy(e.Sums, slices.Repeat(e.Counts[:1], len(e.Sums)))
		for i := range e.Counts {
			e.Counts[i] = e.Counts[0]
		}
	}
	ones := filepath.Join(dir, "ones.imatrix")
	if err := imatrix.Write(ones, g); err != nil {
		t.Fatal(err)
	}
	plain, weighted := filepath.Join(dir, "plain.gguf"), filepath.Join(dir, "weighted.gguf")
	all := []string{"convert", "--hf", tinyGo, "--quant", "trunk=iq2_xs"}
	// The same refusal as the experts' above, allowed: one conversion
	// checks the warning and writes the plain file.
	_, stderr, status = runStrata(t, append(all, "--allow-no-imatrix", "-o", plain)...)
	if allowed(stderr, status); status != 0 {
		t.FailNow()
	}
	stdout, stderr, status = runStrata(t, append(all, "--imatrix", ones, "-o", weighted)...)
	if status != 0 || !strings.Contains(stdout, "quantized with importance weights") {
		t.Fatalf("convert --imatrix: status %d, %q %s", status, stdout, stderr)
	}
	fa, err := gguf.Open(plain)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := gguf.Open(weighted)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	same := 0
	for _, ti := range fa.Tensors {
		if ti.Type.Name != "iq2_xs" {
			continue // iq4_nl fallbacks weigh by x² without a matrix, by qw·sqrt(σ²+x²) with one
		}
		ta, _ := fa.Tensor(ti.Name)
		tb, ok := fb.Tensor(ti.Name)
		if !ok || !slices.Equal(ta.Data, tb.Data) {
			t.Errorf("%s: an imatrix of ones changed its iq2_xs blocks", ti.Name)
		}
		same++
	}
	if same == 0 {
		t.Error("no iq2_xs tensor to compare")
	}
	for _, n := range []string{"blk.0.attn_qkv.weight", "blk.0.attn_gate.weight", "blk.0.ssm_out.weight"} {
		if strings.Contains(stderr, n) {
			t.Errorf("%s (split or with reordered columns) was not weighted: %s", n, stderr)
		}
	}
}
