//go:build amd64

package cpu

import (
	"strings"
	"testing"

	"github.com/strata-llm/strata/internal/asmcheck"
)

// brokenAttention are deliberate faults in tiled attention, each an edit of
// one place in attn.go or in the kernels' generator (asm/gen.go): the causal
// mask of a tile's diagonal, the softmax's keys, a kernel's order of
// additions, a kernel's weights. Each names the failures it must show.
var brokenAttention = []struct {
	what, file, from, to string
	want                 []string // substrings of the failing tests' output
}{
	{
		what: "the diagonal: each key reaches the row before its own",
		file: "attn.go", from: "for nv[r0] <= k {", to: "for nv[r0] < k {",
		want: []string{"--- FAIL: TestAttentionTiles"},
	},
	{
		what: "the softmax over every key of the tile, not the row's own",
		file: "attn.go", from: "sc := scores[qi*nk : qi*nk+nv[qi/heads]]", to: "sc := scores[qi*nk : qi*nk+nk]",
		want: []string{"--- FAIL: TestAttentionTiles"},
	},
	{
		what: "q·k: four keys at a time sum their lanes in another order than one",
		file: "asm/gen.go", from: "VADDPD(hi, lo, lo)\n\t\t\t\tVHADDPD(lo, lo, lo)",
		to:   "if keys == 4 {\n\t\t\t\t\tVHADDPD(lo, lo, lo)\n\t\t\t\t\tVHADDPD(hi, hi, hi)\n\t\t\t\t\tVADDPD(hi, lo, lo)\n\t\t\t\t} else {\n\t\t\t\t\tVADDPD(hi, lo, lo)\n\t\t\t\t\tVHADDPD(lo, lo, lo)\n\t\t\t\t}",
		want: []string{"--- FAIL: TestAttnKernels", "--- FAIL: TestAttentionTiles"},
	},
	{
		what: "value sums: the third query takes the second's weights",
		file: "asm/gen.go", from: "src = Mem{Base: wp, Index: ws, Scale: uint8(r)}", to: "src = Mem{Base: wp, Index: ws, Scale: 1}",
		want: []string{"--- FAIL: TestAttnKernels", "--- FAIL: TestAttentionTiles"},
	},
}

// TestAttentionCatchesBrokenTiles is the control for the attention tests:
// with each fault of brokenAttention planted (through go's -overlay, the
// tree untouched; the assembly regenerated for a generator fault),
// TestAttnKernels and TestAttentionTiles fail where the fault says.
// Skipped with -short (a package build per fault, without -race, so the
// suite's -race run pays the same ~10 s).
func TestAttentionCatchesBrokenTiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package once per fault (-short)")
	}
	if !gdnAVX2 {
		t.Skip("no AVX2 kernels here")
	}
	for _, fault := range brokenAttention {
		t.Run(fault.what, func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			path, broken := asmcheck.Plant(t, tmp, fault.file, fault.from, fault.to)
			replace := map[string]string{path: broken}
			if strings.HasPrefix(fault.file, "asm/") {
				asm, regenerated := asmcheck.Regenerate(t, tmp, "asm", replace, "vec_amd64.s", "cpu")
				replace = map[string]string{asm: regenerated}
			}
			asmcheck.MustFail(t, tmp, replace, "^(TestAttnKernels|TestAttentionTiles)$", fault.want)
		})
	}
}
