package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/format/gguf"
)

// A run that fails midway (here at the context limit) has streamed what it
// generated: the reference's first greedy tokens, then the error.
func TestRunFailureKeepsTokens(t *testing.T) {
	greedy := refInts(t, tinyA, "greedy_tokens")
	// Prompt 16, context 20: four decode windows fit, the fifth does not.
	out, errText, status := runStrata(t, "run", "--hf", tinyA, "--tokens", joinInts(greedy[:16], ","), "--context", "20", "-n", "16")
	if status != 1 || !strings.Contains(errText, "context") || !strings.Contains(errText, "after 5 generated tokens") {
		t.Fatalf("status %d, stderr %q", status, errText)
	}
	if out != joinInts(greedy[16:21], " ")+"\n" {
		t.Fatalf("stdout %q, want %q", out, joinInts(greedy[16:21], " "))
	}
}

// config.json's eos_token_id ends generation when there is no
// generation_config.json (as HF's generate falls back to it): the run stops
// at the first generated EOS, which it prints, unless --ignore-eos.
func TestRunStopsAtEOS(t *testing.T) {
	greedy := refInts(t, tinyA, "greedy_tokens")
	eos := greedy[20]
	dir := copyCheckpoint(t, func(s string) string {
		return strings.Replace(s, `"eos_token_id": null`, `"eos_token_id": `+strconv.Itoa(eos), 1)
	}, nil)
	prompt := joinInts(greedy[:16], ",")
	want := joinInts(greedy[16:16+indexOf(greedy[16:], eos)+1], " ")
	out, errText, status := runStrata(t, "run", "--hf", dir, "--tokens", prompt, "-n", "16")
	if status != 0 || strings.TrimSpace(out) != want {
		t.Fatalf("status %d: %q, want %q (%s)", status, out, want, errText)
	}
	out, errText, status = runStrata(t, "run", "--hf", dir, "--tokens", prompt, "-n", "16", "--ignore-eos")
	if status != 0 || strings.TrimSpace(out) != joinInts(greedy[16:32], " ") {
		t.Fatalf("--ignore-eos: status %d: %q, want %q (%s)", status, out, joinInts(greedy[16:32], " "), errText)
	}
}

// generation_config.json's eos_token_id (an id or a list) ends generation;
// a malformed one is an error naming the file.
func TestRunGenerationConfigEOS(t *testing.T) {
	greedy := refInts(t, tinyA, "greedy_tokens")
	dir := copyCheckpoint(t, nil, nil)
	gc := filepath.Join(dir, "generation_config.json")
	prompt := joinInts(greedy[:16], ",")
	for _, body := range []string{
		`{"eos_token_id": ` + strconv.Itoa(greedy[20]) + `}`,
		`{"do_sample": false, "eos_token_id": [511, ` + strconv.Itoa(greedy[20]) + `]}`,
	} {
		if err := os.WriteFile(gc, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		first := 16 + indexOf(greedy[16:], greedy[20])
		out, errText, status := runStrata(t, "run", "--hf", dir, "--tokens", prompt, "-n", "16")
		if status != 0 || strings.TrimSpace(out) != joinInts(greedy[16:first+1], " ") {
			t.Fatalf("%s: status %d: %q, want %q (%s)", body, status, out, joinInts(greedy[16:first+1], " "), errText)
		}
	}
	if err := os.WriteFile(gc, []byte(`{"eos_token_id": "x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errText, status := runStrata(t, "run", "--hf", dir, "--tokens", prompt); status != 1 || !strings.Contains(errText, gc) {
		t.Fatalf("malformed: status %d, stderr %q", status, errText)
	}
}

func indexOf(v []int, x int) int {
	for i, y := range v {
		if y == x {
			return i
		}
	}
	return -1
}

// Sampling: top-k 1 at any temperature is HF's greedy path (with drafts
// too); a seed reproduces its run; timings come as prompt and generation.
func TestRunSampling(t *testing.T) {
	want := joinInts(refInts(t, tinyA, "greedy_tokens")[16:32], " ")
	for _, extra := range [][]string{{}, {"--spec", "2"}, {"--threads", "1"}} {
		args := append([]string{"run", "--hf", tinyA, "--tokens", tinyPrompt(t), "--temperature", "1.5", "--top-k", "1", "--seed", "9"}, extra...)
		out, errText, status := runStrata(t, args...)
		if status != 0 || strings.TrimSpace(out) != want {
			t.Fatalf("%v: status %d: %q, want %q (%s)", args, status, out, want, errText)
		}
		for _, w := range []string{"prompt eval time", "/    16 tokens", "eval time", "/    15 tokens", "tokens per second"} {
			if !strings.Contains(errText, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, w, errText)
			}
		}
	}
	run := func(seed string) string {
		out, errText, status := runStrata(t, "run", "--hf", tinyA, "--tokens", tinyPrompt(t), "--temperature", "1", "--top-p", "0.9", "--repeat-penalty", "1.2", "--seed", seed, "--spec", "auto", "--spec-state", "-")
		if status != 0 {
			t.Fatalf("seed %s: status %d: %s", seed, status, errText)
		}
		return out
	}
	a, b, c := run("5"), run("5"), run("6")
	if a != b {
		t.Errorf("seed 5 twice: %q and %q", a, b)
	}
	if a == c || a == want+"\n" {
		t.Errorf("seed 5 %q, seed 6 %q, greedy %q: sampling changed nothing", a, c, want)
	}
}

func TestSamplingFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--temperature", "NaN"}, "--temperature is NaN"},
		{[]string{"--temperature", "-1"}, "--temperature is -1"},
		{[]string{"--top-k", "-1"}, "--top-k is -1"},
		{[]string{"--top-p", "0"}, "--top-p is 0"},
		{[]string{"--top-p", "1.5"}, "--top-p is 1.5"},
		{[]string{"--min-p", "2"}, "--min-p is 2"},
		{[]string{"--repeat-penalty", "0"}, "--repeat-penalty is 0"},
		{[]string{"--repeat-penalty", "-1"}, "--repeat-penalty is -1"},
		{[]string{"--presence-penalty", "3"}, "--presence-penalty is 3"},
		{[]string{"--frequency-penalty", "NaN"}, "--frequency-penalty is NaN"},
		{[]string{"--repeat-last-n", "-2"}, "--repeat-last-n is -2"},
		{[]string{"--stop", ""}, "--stop is empty"},
		{[]string{"--hf", tinyA, "--tokens", "1", "--stop", "x"}, "--stop matches the generated text"}, // tiny-a has no tokenizer
		{[]string{"--threads", "-1"}, "--threads is -1"},
	} {
		_, errText, status := runStrata(t, append([]string{"run"}, c.args...)...)
		if status != 2 || !strings.Contains(errText, c.want) {
			t.Errorf("%v: status %d, stderr %q, want 2 and %q", c.args, status, errText, c.want)
		}
	}
}

func TestVersion(t *testing.T) {
	out, _, status := runStrata(t, "--version")
	if status != 0 || !strings.HasPrefix(out, "strata ") || !strings.Contains(out, "go1.") {
		t.Fatalf("status %d: %q", status, out)
	}
}

// A GGUF's tokenizer.ggml.eos_token_id (llama.cpp's key) joins the config's
// EOS ids; without the key the config's stand; an id outside the vocabulary
// is refused by name.
func TestGGUFEOS(t *testing.T) {
	dir := t.TempDir()
	c := &models.Config{}
	c.Architecture.VocabSize = 100
	c.Architecture.EOSTokenIDs = []int{7}
	for _, tc := range []struct {
		kv   []gguf.KV
		want []int
		err  string
	}{
		{nil, []int{7}, ""},
		{[]gguf.KV{{Key: "tokenizer.ggml.eos_token_id", Value: uint32(42)}}, []int{7, 42}, ""},
		{[]gguf.KV{{Key: "tokenizer.ggml.eos_token_id", Value: uint32(7)}}, []int{7}, ""},
		{[]gguf.KV{{Key: "tokenizer.ggml.eos_token_id", Value: uint32(100)}}, nil, "tokenizer.ggml.eos_token_id is 100"},
	} {
		path := filepath.Join(dir, "m.gguf")
		kv := append([]gguf.KV{{Key: "general.architecture", Value: "qwen3next"}}, tc.kv...)
		if err := gguf.WriteFile(path, kv, nil); err != nil {
			t.Fatal(err)
		}
		got, err := eosIDs("", path, c)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want %q", tc.kv, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%v: %v %v, want %v", tc.kv, got, err, tc.want)
		}
	}
}

// --threads sets the cpu kernels' goroutines (the model's cpu backend's,
// which the timings line names); 0 leaves the config's runtime.threads (0
// in tiny-a: one per core).
func TestThreadsFlag(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  int
	}{{[]string{"--threads", "3"}, 3}, {nil, runtime.GOMAXPROCS(0)}} {
		_, errText, status := runStrata(t, append([]string{"run", "--hf", tinyA, "--tokens", "1,2", "-n", "2"}, tc.flags...)...)
		if want := fmt.Sprintf("%d cpu threads)", tc.want); status != 0 || !strings.Contains(errText, want) {
			t.Fatalf("%v: status %d, want %q in the timings: %s", tc.flags, status, want, errText)
		}
	}
	if _, errText, status := runStrata(t, "bench", "--hf", tinyA, "-p", "2", "-n", "1", "-r", "1", "--warmup", "0", "--threads", "2"); status != 0 {
		t.Fatalf("bench --threads 2: status %d (%s)", status, errText)
	}
}

// tinyPrompt is tiny-a's reference prompt (its first 16 tokens), as ids.
func tinyPrompt(t *testing.T) string {
	return joinInts(refInts(t, tinyA, "greedy_tokens")[:16], ",")
}
