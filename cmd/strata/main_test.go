package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-llm/strata/internal/reftensor"
	"github.com/strata-llm/strata/runtime/format/safetensors"
)

const tinyA = "../../testdata/oracles/tiny-a"

func runStrata(t *testing.T, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	var o, e bytes.Buffer
	status = run(args, &o, &e)
	return o.String(), e.String(), status
}

// refInts reads an int32 tensor of dir's reference.safetensors.
func refInts(t *testing.T, dir, name string) []int {
	t.Helper()
	return reftensor.Open(t, filepath.Join(dir, "reference.safetensors")).Ints(name)
}

func joinInts(v []int, sep string) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, sep)
}

// defaultRunText is what `strata run` prints: the default prompt and 16
// generated tokens of tiny-go as text, a prefix of HF's greedy_text.
func defaultRunText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tinyGo, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Greedy string `json:"greedy_text"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	// Tokens 0…31 of the greedy path end with this (32 of HF's 64).
	const end = "o.markRemoved();"
	i := strings.Index(ref.Greedy, end)
	if i < 0 {
		t.Fatalf("greedy_text %q has no %q", ref.Greedy, end)
	}
	return ref.Greedy[:i+len(end)] + "\n"
}

// The README's first command: the embedded default streams its Go prompt and
// continuation as text, exactly HF's greedy decode.
func TestRunDefault(t *testing.T) {
	out, errText, status := runStrata(t, "run")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errText)
	}
	if want := defaultRunText(t); out != want {
		t.Fatalf("stdout %q, want %q", out, want)
	}
	// With --tokens, ids: the same 16 as HF's greedy path.
	prompt := refInts(t, tinyGo, "greedy_tokens")
	out, errText, status = runStrata(t, "run", "--tokens", joinInts(prompt[:16], ","))
	if status != 0 {
		t.Fatalf("status %d: %s", status, errText)
	}
	if strings.TrimSpace(out) != joinInts(prompt[16:32], " ") {
		t.Fatalf("stdout %q, want %q", out, joinInts(prompt[16:32], " "))
	}
}

func TestRunHFDumpLogits(t *testing.T) {
	tokens := refInts(t, tinyA, "tokens")[:10]
	path := filepath.Join(t.TempDir(), "logits.safetensors")
	for _, n := range []int{0, 3} {
		out, errText, status := runStrata(t, "run", "--hf", tinyA, "--tokens", joinInts(tokens, ","), "-n", strconv.Itoa(n), "--prefill-rows", "4", "--dump-logits", path)
		if status != 0 {
			t.Fatalf("status %d: %s", status, errText)
		}
		if got := len(strings.Fields(out)); got != n {
			t.Fatalf("-n %d printed %d tokens: %q", n, got, out)
		}
		f, err := safetensors.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		lt, ok := f.Tensor("logits")
		if !ok || lt.DType != "F32" {
			t.Fatalf("dump has no F32 tensor logits: %v", f.Names())
		}
		rows := len(tokens) + max(n-1, 0)
		if lt.Shape[0] != rows || lt.Shape[1] != 512 {
			t.Fatalf("logits shape %v, want [%d 512]", lt.Shape, rows)
		}
		if n == 0 { // the prompt rows are the reference's first rows
			got, _ := lt.Float32s()
			ref, _ := safetensors.Open(filepath.Join(tinyA, "reference.safetensors"))
			rt, _ := ref.Tensor("logits")
			want, _ := rt.Float32s()
			for r := 0; r < rows; r++ {
				var d, nn float64
				for i := 0; i < 512; i++ {
					e := float64(got[r*512+i] - want[r*512+i])
					d, nn = d+e*e, nn+float64(want[r*512+i])*float64(want[r*512+i])
				}
				if e := math.Sqrt(d / nn); e > 1e-4 {
					t.Errorf("row %d: relative L2 %.3g", r, e)
				}
			}
			ref.Close()
		}
		f.Close()
	}
}

// copyCheckpoint writes a copy of tiny-a into a temp dir, letting edit change
// the config (as a map) and the tensors first.
func copyCheckpoint(t *testing.T, editConfig func(string) string, editTensors func([]safetensors.Tensor) []safetensors.Tensor) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ck")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(tinyA, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if editConfig != nil {
		cfg = []byte(editConfig(string(cfg)))
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(filepath.Join(tinyA, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []safetensors.Tensor
	for _, n := range f.Names() {
		tt, _ := f.Tensor(n)
		ts = append(ts, tt)
	}
	if editTensors != nil {
		ts = editTensors(ts)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRunBadInput(t *testing.T) {
	drop := func(name string) func([]safetensors.Tensor) []safetensors.Tensor {
		return func(ts []safetensors.Tensor) []safetensors.Tensor {
			var out []safetensors.Tensor
			for _, x := range ts {
				if x.Name != name {
					out = append(out, x)
				}
			}
			return out
		}
	}
	reshape := func(name string) func([]safetensors.Tensor) []safetensors.Tensor {
		return func(ts []safetensors.Tensor) []safetensors.Tensor {
			for i := range ts {
				if ts[i].Name == name { // same bytes, transposed shape
					ts[i].Shape = []int{ts[i].Shape[1], ts[i].Shape[0]}
				}
			}
			return ts
		}
	}
	truncated := copyCheckpoint(t, nil, nil)
	st := filepath.Join(truncated, "model.safetensors")
	info, _ := os.Stat(st)
	if err := os.Truncate(st, info.Size()-1000); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		args   []string
		status int
		want   []string // substrings of stderr
	}{
		{"token id ≥ vocab", []string{"run", "--hf", tinyA, "--tokens", "1,2,512"}, 1, []string{"token 512", "vocabulary of 512"}},
		{"token not a number", []string{"run", "--hf", tinyA, "--tokens", "1,x"}, 2, []string{"--tokens", `"x"`}},
		{"negative -n", []string{"run", "-n", "-1"}, 2, []string{"-n must be"}},
		{"unknown flag", []string{"run", "--frobnicate"}, 2, []string{"frobnicate"}},
		{"unknown command", []string{"fly"}, 2, []string{`unknown command "fly"`}},
		{"--hf without --tokens", []string{"run", "--hf", tinyA}, 2, []string{"--tokens is required"}},
		{"no such directory", []string{"run", "--hf", "/no/such/dir", "--tokens", "1"}, 1, []string{"--hf: stat /no/such/dir: no such file"}},
		{"missing tensor", []string{"run", "--hf", copyCheckpoint(t, nil, drop("model.layers.3.self_attn.q_proj.weight")), "--tokens", "1"}, 1,
			[]string{"model.layers.3.self_attn.q_proj.weight"}},
		{"wrong shape", []string{"run", "--hf", copyCheckpoint(t, nil, reshape("model.layers.1.linear_attn.in_proj_qkvz.weight")), "--tokens", "1"}, 1,
			[]string{"model.layers.1.linear_attn.in_proj_qkvz.weight", "shape"}},
		{"config field missing", []string{"run", "--hf", copyCheckpoint(t, func(s string) string {
			return strings.Replace(s, `"hidden_size": 64,`, "", 1)
		}, nil), "--tokens", "1"}, 1, []string{"hidden_size"}},
		{"config field wrong", []string{"run", "--hf", copyCheckpoint(t, func(s string) string {
			return strings.Replace(s, `"num_key_value_heads": 2,`, `"num_key_value_heads": 3,`, 1)
		}, nil), "--tokens", "1"}, 1, []string{"num_kv_heads"}},
		{"truncated safetensors", []string{"run", "--hf", truncated, "--tokens", "1"}, 1, []string{"truncated"}},
		{"past the context", []string{"run", "--hf", tinyA, "--tokens", "1,2,3", "-n", "8", "--context", "6"}, 1, []string{"context"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errText, status := runStrata(t, c.args...)
			t.Log(strings.TrimSpace(errText))
			if status != c.status {
				t.Fatalf("status %d, want %d; stderr: %s", status, c.status, errText)
			}
			for _, w := range c.want {
				if !strings.Contains(errText, w) {
					t.Errorf("stderr does not mention %q:\n%s", w, errText)
				}
			}
		})
	}
}
