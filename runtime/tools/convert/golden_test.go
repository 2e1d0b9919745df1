package convert_test

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/arch"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/format/safetensors"
	"github.com/strata-llm/strata/runtime/tools/convert"
	"github.com/strata-llm/strata/runtime/weights"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from what this code writes")

// goldenCases cover both architectures, with and without MTP, from an HF
// checkpoint and from random weights, at float and quantized plans.
var goldenCases = []struct {
	name, model, oracle, plan string
	mtp                       int // MTP layers to set (-1: the config's)
}{
	{"tiny-a-hf-q8", "tiny-a", "tiny-a", "trunk=q8_0,experts=q4_k", -1},
	{"tiny-a-random-mtp", "tiny-a", "", "trunk=q8_0,experts=q8_0,embed=f16", 1},
	{"q4-a-hf-q8", "q4-a", "q4-a", "trunk=q8_0", -1},
	{"q4-a-random-mtp", "q4-a", "", "all=q8_0,experts=q4_k", 1},
	{"tiny-go-random", "tiny-go", "", "trunk=q8_0,experts=q4_k", -1},
}

// The GGUF files strata convert writes, and the configs read back from their
// metadata alone (strata.config removed, as in a llama.cpp file), equal the
// goldens byte for byte: the file's SHA-256, every metadata key with its
// type and value, and the derived config's model.toml. Regenerate with
// -update only when a change of the format is the point.
func TestGoldenFiles(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			got := goldenDump(t, c.model, c.oracle, c.plan, c.mtp)
			path := filepath.Join("testdata", "golden", c.name+".txt")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if got != string(want) {
				gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
				for i := 0; i < max(len(gl), len(wl)); i++ {
					var g, w string
					if i < len(gl) {
						g = gl[i]
					}
					if i < len(wl) {
						w = wl[i]
					}
					if g != w {
						t.Fatalf("%s differs at line %d:\n got  %q\n want %q", path, i+1, g, w)
					}
				}
			}
		})
	}
}

func goldenDump(t *testing.T, model, oracle, plan string, mtp int) string {
	t.Helper()
	c, err := models.Embedded(model)
	if err != nil {
		t.Fatal(err)
	}
	if mtp >= 0 {
		c.Architecture.MTP.NumLayers = mtp
	}
	if c.Quant, err = convert.ParsePlan(c.Quant, plan); err != nil {
		t.Fatal(err)
	}
	var src convert.Source = weights.NewRandom(7)
	if oracle != "" {
		ck, err := safetensors.OpenDir(filepath.Join("..", "..", "..", "testdata", "oracles", oracle))
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		src = weights.NewHF(ck, c)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, model+".gguf")
	if _, err := convert.Write(path, c, src, convert.Options{}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "sha256 %x\n", sha256.Sum256(data))
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var kv []gguf.KV
	for _, p := range f.KV {
		if p.Key != gguf.KeyConfig {
			kv = append(kv, p)
		}
		fmt.Fprintf(&b, "kv %s %s\n", p.Key, summary(p.Value))
	}
	// The same file less strata.config: the config from metadata alone.
	var ts []gguf.Tensor
	for _, ti := range f.Tensors {
		tn, _ := f.Tensor(ti.Name)
		ts = append(ts, gguf.Tensor{TensorInfo: gguf.TensorInfo{Name: ti.Name, Dims: ti.Dims, Type: ti.Type}, Data: tn.Data})
	}
	bare := filepath.Join(dir, model+"-bare.gguf")
	if err := gguf.WriteFile(bare, kv, ts); err != nil {
		t.Fatal(err)
	}
	bf, err := gguf.Open(bare)
	if err != nil {
		t.Fatal(err)
	}
	defer bf.Close()
	mc, err := arch.ConfigOf(bf)
	if err != nil {
		fmt.Fprintf(&b, "config from metadata: error %v\n", strings.ReplaceAll(err.Error(), dir, "DIR"))
		return b.String()
	}
	toml, err := mc.MarshalTOML()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "config from metadata:\n%s", strings.ReplaceAll(string(toml), dir, "DIR"))
	return b.String()
}

// summary renders a metadata value with its type; long strings and arrays
// by length and hash.
func summary(v any) string {
	typ, _ := gguf.TypeOf(v)
	switch x := v.(type) {
	case gguf.Array:
		s := fmt.Sprint(x.Values)
		if len(s) > 200 {
			s = fmt.Sprintf("len %d sha256 %x", x.Len(), sha256.Sum256([]byte(s)))
		}
		return fmt.Sprintf("array<%s> %s", x.Elem, s)
	case string:
		if len(x) > 80 {
			return fmt.Sprintf("%s len %d sha256 %x", typ, len(x), sha256.Sum256([]byte(x)))
		}
		return fmt.Sprintf("%s %q", typ, x)
	}
	return fmt.Sprintf("%s %v", typ, v)
}
