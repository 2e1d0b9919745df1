package models

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var checkedInModels = []string{"tiny-a", "tiny-k512", "qwen3-next-80b-a3b"}

func readModelText(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(name, "model.toml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// replaceOnce edits a model.toml text and fails the test if the edit did not
// apply, so a changed fixture cannot make a test vacuous.
func replaceOnce(t *testing.T, text, old, new string) string {
	t.Helper()
	if strings.Count(text, old) != 1 {
		t.Fatalf("fixture edit: %q occurs %d times, want 1", old, strings.Count(text, old))
	}
	return strings.Replace(text, old, new, 1)
}

func TestCheckedInModelsLoad(t *testing.T) {
	for _, name := range checkedInModels {
		c, err := Load(filepath.Join(name, "model.toml"))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if c.Name != name {
			t.Errorf("%s: name = %q, want the folder name", name, c.Name)
		}
	}
}

// The 80B values come from the spec (§1), not from the importer: check the
// ones a wrong hand edit would most likely break.
func TestQwen3Next80BMatchesSpec(t *testing.T) {
	c, err := Load("qwen3-next-80b-a3b/model.toml")
	if err != nil {
		t.Fatal(err)
	}
	a := c.Architecture
	full := 0
	for i, lt := range a.LayerTypes {
		if lt == LayerFullAttention {
			full++
			if (i+1)%4 != 0 {
				t.Errorf("layer %d is full attention; spec: only layers with (i+1)%%4 == 0", i)
			}
		}
	}
	got := []any{a.HiddenSize, a.NumLayers, full, a.VocabSize, a.RMSNormEps, a.TieWordEmbeddings,
		a.Attention.NumHeads, a.Attention.NumKVHeads, a.Attention.HeadDim, a.Attention.RotaryDim(),
		a.Attention.RopeTheta, a.Attention.MaxPositions, a.Attention.OutputGate,
		a.LinearAttention.KeyDim(), a.LinearAttention.ValueDim(), a.LinearAttention.ConvDim(), a.LinearAttention.ConvKernel,
		a.MoE.NumExperts, a.MoE.ExpertsPerToken, a.MoE.IntermediateSize, a.MoE.SharedExpertIntermediateSize,
		a.MoE.NormTopKProb, a.MoE.DenseIntermediateSize, a.MTP.NumLayers,
		c.Quant, c.Runtime.ContextLength, c.Windows.MaxDecodeRows, c.Windows.PrefillRows}
	want := []any{2048, 48, 12, 151936, 1e-6, false,
		16, 2, 256, 64,
		1e7, 262144, true,
		2048, 4096, 8192, 4,
		512, 10, 512, 512,
		true, 5120, 1,
		QuantPlan{Trunk: "bf16", Experts: "bf16", Embeddings: "bf16", Head: "bf16"}, 32768, 4, 512}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("80B config:\n got %v\nwant %v", got, want)
	}
}

func TestParseMissingField(t *testing.T) {
	text := replaceOnce(t, readModelText(t, "tiny-a"), "head_dim = 32\n", "")
	_, err := Parse([]byte(text), "models/tiny-a/model.toml")
	want := "models/tiny-a/model.toml: architecture.attention.head_dim: missing (expected a positive integer)"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

func TestParseMissingTableAndManyFields(t *testing.T) {
	text := readModelText(t, "tiny-a")
	text = replaceOnce(t, text, "[windows]", "[unused]")
	text = replaceOnce(t, text, "max_decode_rows = 4\n", "")
	text = replaceOnce(t, text, "prefill_rows = 16\n", "")
	text = replaceOnce(t, text, "vocab_size = 512\n", "")
	text = replaceOnce(t, text, `trunk = "f32"`+"\n", "")
	_, err := Parse([]byte(text), "m.toml")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"m.toml: windows: missing table",
		"m.toml: architecture.vocab_size: missing",
		"m.toml: quant.trunk: missing (expected a quant format name)",
		"m.toml: unused: unknown key",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestParseOptionalFieldsMayBeOmitted(t *testing.T) {
	text := readModelText(t, "tiny-a")
	text = replaceOnce(t, text, "dense_intermediate_size = 128", "")
	text = replaceOnce(t, text, "num_layers = 0\n", "")
	text = replaceOnce(t, text, "threads = 0", "")
	c, err := Parse([]byte(text), "m.toml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Runtime.Threads != 0 || c.Architecture.MoE.MLPOnlyLayers != nil ||
		c.Architecture.MoE.DenseIntermediateSize != 0 || c.Architecture.MTP.NumLayers != 0 {
		t.Errorf("defaults not applied: %+v", c)
	}
}

func TestParseUnknownKeys(t *testing.T) {
	for _, tc := range []struct{ edit, want string }{
		{"head_dimm = 32\n", "m.toml: architecture.attention.head_dimm: unknown key (did you mean head_dim?)"},
		// The decoder matches keys case-insensitively; a model.toml must not.
		{"Head_Dim = 32\n", "m.toml: architecture.attention.Head_Dim: unknown key (did you mean head_dim?)"},
		{"rope_scaling = 2.0\n", "m.toml: architecture.attention.rope_scaling: unknown key"},
	} {
		text := replaceOnce(t, readModelText(t, "tiny-a"), "head_dim = 32\n", "head_dim = 32\n"+tc.edit)
		_, err := Parse([]byte(text), "m.toml")
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: err = %v\nwant %s", tc.edit, err, tc.want)
		}
	}

	// A whole unknown table is reported once, not key by key.
	text := readModelText(t, "tiny-a") + "\n[extras]\na = 1\nb = 2\n"
	_, err := Parse([]byte(text), "m.toml")
	if err == nil || err.Error() != "m.toml: extras: unknown key" {
		t.Errorf("err = %v", err)
	}
}

func TestParseWrongType(t *testing.T) {
	text := replaceOnce(t, readModelText(t, "tiny-a"), "hidden_size = 64", `hidden_size = "64"`)
	_, err := Parse([]byte(text), "m.toml")
	if err == nil || !strings.HasPrefix(err.Error(), "m.toml: ") || !strings.Contains(err.Error(), "architecture.hidden_size") {
		t.Errorf("err = %v; want the file and architecture.hidden_size named", err)
	}
}

func TestParseSyntaxError(t *testing.T) {
	_, err := Parse([]byte("name = \n"), "m.toml")
	if err == nil || !strings.HasPrefix(err.Error(), "m.toml: ") {
		t.Errorf("err = %v", err)
	}
}

func TestParseRunsValidate(t *testing.T) {
	text := replaceOnce(t, readModelText(t, "tiny-a"), "head_dim = 32", "head_dim = 0")
	_, err := Parse([]byte(text), "m.toml")
	if err == nil || !strings.Contains(err.Error(), "m.toml: architecture.attention.head_dim: is 0 (expected a positive integer)") {
		t.Errorf("err = %v", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.toml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v; want a wrapped not-exist error", err)
	}
}

// FuzzParse fuzzes one table of a model.toml at a time: the input replaces
// the body of one of tiny-a's tables (it may hold any TOML, new tables
// included), so inputs stay a few hundred bytes. The fuzzer minimizes every
// input that finds new coverage, at a cost that grows with the square of
// its length: whole-file inputs of 2-3 KB spent a minute there each time.
func FuzzParse(f *testing.F) {
	base, err := os.ReadFile(filepath.Join("tiny-a", "model.toml"))
	if err != nil {
		f.Fatal(err)
	}
	sections := tomlSections(base)
	for _, name := range checkedInModels {
		data, err := os.ReadFile(filepath.Join(name, "model.toml"))
		if err != nil {
			f.Fatal(err)
		}
		for i, s := range tomlSections(withoutCommentLines(data)) {
			if i < len(sections) {
				f.Add(uint8(i), []byte(s.body))
			}
		}
	}
	f.Fuzz(func(t *testing.T, section uint8, body []byte) {
		var doc strings.Builder
		for i, s := range sections {
			doc.WriteString(s.header)
			if i == int(section)%len(sections) {
				doc.Write(body)
				doc.WriteString("\n")
			} else {
				doc.WriteString(s.body)
			}
		}
		data := []byte(doc.String())
		c, err := Parse(data, "fuzz.toml")
		if err != nil {
			return
		}
		// Whatever parses must survive the round trip.
		text, err := c.MarshalTOML()
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(text, "again.toml")
		if err != nil || !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip: %v\n%s", err, text)
		}
	})
}

// tomlSection is a table header line ("" for the top level) and its body.
type tomlSection struct{ header, body string }

// tomlSections splits a TOML file at its table header lines.
func tomlSections(data []byte) []tomlSection {
	out := []tomlSection{{}}
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "[") {
			out = append(out, tomlSection{header: line})
			continue
		}
		out[len(out)-1].body += line
	}
	return out
}

// withoutCommentLines drops a TOML file's comment-only and blank lines.
func withoutCommentLines(data []byte) []byte {
	var out []byte
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		out = append(out, line...)
	}
	return out
}
