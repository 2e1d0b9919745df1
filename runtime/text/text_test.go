package text

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/format/planes"
	"github.com/strata-llm/strata/runtime/text/chat"
)

// tinyDir is a copy of the tiny-go checkpoint's text files (tokenizer.json,
// tokenizer_config.json, generation_config.json as shared/models/tiny-go has them).
func tinyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		data, err := planes.ReadOSFile(filepath.Join("..", "..", "models", "tiny-go", name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, name), data, 0o644)
	}
	os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"do_sample": false, "eos_token_id": [0, 2], "pad_token_id": 0}`), 0o644)
	return dir
}

// TestHFAndGGUFAgree: tiny-go's text model read from its HF files, written as
// GGUF metadata and read back keeps its EOS ids, pad id, template and
// encoding (the rendered reference conversation's ids are transformers').
func TestHFAndGGUFAgree(t *testing.T) {
	m, err := FromHF(tinyDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.EOS, []int{0, 2}) || m.PAD != 0 || m.BOS != -1 || m.AddBOS || m.Template == nil {
		t.Fatalf("from HF: eos %v pad %d bos %d addbos %v template %v", m.EOS, m.PAD, m.BOS, m.AddBOS, m.Template != nil)
	}
	kv, err := m.GGUFMetadata(8192)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "t.gguf")
	if err := gguf.WriteFile(path, append([]gguf.KV{{Key: "general.architecture", Value: "test"}}, kv...), nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if eos, _ := f.Uint(gguf.KeyEOSID); eos != 0 { // tokenizer_config eos_token <|endoftext|>
		t.Fatalf("eos_token_id %d, want 0", eos)
	}
	g, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.EOS, []int{0, 2}) || g.PAD != 0 || g.Template == nil || g.Tokens.EOS != "<|endoftext|>" {
		t.Fatalf("from GGUF: eos %v pad %d template %v tokens %+v", g.EOS, g.PAD, g.Template != nil, g.Tokens)
	}
	f2 := false
	got, err := g.Template.Render([]chat.Message{{Role: "user", Content: "Summarize: Go is an open source programming language."}},
		chat.Options{EnableThinking: &f2})
	if err != nil {
		t.Fatal(err)
	}
	// chat_template_cases.jsonl line 1 (transformers).
	want := []int{1, 3888, 207, 59, 2844, 298, 435, 34, 799, 352, 354, 2392, 999, 7069, 303, 3935, 22, 2, 207}
	if ids := g.Encode(got); !slices.Equal(ids, want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
}

// TestNoTokenizer: a directory without tokenizer.json and a GGUF without
// tokenizer metadata say so with ErrNoTokenizer.
func TestNoTokenizer(t *testing.T) {
	if _, err := FromHF(t.TempDir()); err == nil || !errors.Is(err, ErrNoTokenizer) {
		t.Fatalf("FromHF(empty dir) = %v", err)
	}
	path := filepath.Join(t.TempDir(), "bare.gguf")
	if err := gguf.WriteFile(path, []gguf.KV{{Key: "general.architecture", Value: "test"}}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := FromGGUF(f); !errors.Is(err, ErrNoTokenizer) {
		t.Fatalf("FromGGUF(bare) = %v", err)
	}
}

// TestFromFS: the files read where they lie (an fs.FS, as the embedded
// default model's are) give the model the same files on disk give, the
// reference conversation's ids included; a broken config names its file.
func TestFromFS(t *testing.T) {
	dir := tinyDir(t)
	files := fstest.MapFS{}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = &fstest.MapFile{Data: data}
	}
	m, err := FromFS(files, "embedded")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.EOS, []int{0, 2}) || m.PAD != 0 || m.Template == nil {
		t.Fatalf("from an fs.FS: eos %v pad %d template %v", m.EOS, m.PAD, m.Template != nil)
	}
	d, err := FromHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "func (s *Server) "
	if got, want := m.Encode(prompt), d.Encode(prompt); !slices.Equal(got, want) || len(want) == 0 || m.TemplateSource != d.TemplateSource || m.BOS != d.BOS || m.eos != d.eos {
		t.Fatalf("from an fs.FS: %v, bos %d, eos %d; from disk: %v, bos %d, eos %d (templates equal: %v)", got, m.BOS, m.eos, want, d.BOS, d.eos, m.TemplateSource == d.TemplateSource)
	}
	files["generation_config.json"] = &fstest.MapFile{Data: []byte("{")}
	if _, err := FromFS(files, "embedded"); err == nil || !strings.Contains(err.Error(), filepath.Join("embedded", "generation_config.json")) {
		t.Fatalf("a broken generation_config.json: %v", err)
	}
	delete(files, "tokenizer.json")
	if _, err := FromFS(files, "embedded"); !errors.Is(err, ErrNoTokenizer) {
		t.Fatalf("no tokenizer.json: %v", err)
	}
}
