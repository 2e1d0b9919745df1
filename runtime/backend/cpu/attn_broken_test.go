//go:build amd64

package cpu

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
			path, err := filepath.Abs(fault.file)
			if err != nil {
				t.Fatal(err)
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(src), fault.from); n != 1 {
				t.Fatalf("%q appears %d times in %s, expected once: the fault is stale", fault.from, n, fault.file)
			}
			broken := filepath.Join(tmp, filepath.Base(fault.file))
			if err := os.WriteFile(broken, []byte(strings.Replace(string(src), fault.from, fault.to, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			replace := map[string]string{path: broken}
			if strings.HasPrefix(fault.file, "asm/") {
				asm, err := filepath.Abs("vec_amd64.s")
				if err != nil {
					t.Fatal(err)
				}
				outS := filepath.Join(tmp, "vec_amd64.s")
				cmd := exec.Command("go", "run", "-overlay", attnOverlay(t, tmp, replace), ".",
					"-out", outS, "-stubs", filepath.Join(tmp, "decl.go"), "-pkg", "cpu")
				cmd.Dir = "asm"
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("generating with the fault: %v\n%s", err, out)
				}
				replace = map[string]string{asm: outS}
			}
			cmd := exec.Command("go", "test", "-overlay", attnOverlay(t, tmp, replace), "-count=1",
				"-run", "^(TestAttnKernels|TestAttentionTiles)$", ".")
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the attention tests pass with the fault planted:\n%s", out)
			}
			for _, w := range fault.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("no failure mentions %q:\n%s", w, out)
				}
			}
		})
	}
}

// attnOverlay writes a go -overlay file with the given replacements and
// returns its name.
func attnOverlay(t *testing.T, dir string, replace map[string]string) string {
	t.Helper()
	b, err := json.Marshal(map[string]map[string]string{"Replace": replace})
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}
