package chat

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/internal/sharedrefs"
	"github.com/strata-llm/strata/runtime/text/tokenizer"
)

var testdata = filepath.Join("..", "..", "..", "testdata")

type chatCase struct {
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
	EnableThinking      *bool           `json:"enable_thinking"`
	Rendered            string          `json:"rendered"`
	IDs                 []int           `json:"ids"`
	IDsTinyGo           []int           `json:"ids_tiny_go"`
}

// TestReferenceConversations: Qwen3's and tiny-go's own templates render every
// reference conversation to transformers' string, and both tokenizers encode
// it to transformers' ids.
func TestReferenceConversations(t *testing.T) {
	qwen, err := tokenizer.Load(sharedrefs.Qwen3Tokenizer())
	if err != nil {
		t.Fatal(err)
	}
	tiny, err := tokenizer.Load(filepath.Join("..", "..", "..", "models", "tiny-go", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tmpls []*Template
	for _, dir := range []string{filepath.Join(testdata, "tokenizer-refs", "qwen3"), filepath.Join("..", "..", "..", "models", "tiny-go")} {
		cfg, err := LoadConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Template == "" {
			t.Fatalf("%s: no chat template", dir)
		}
		tmpl, err := Compile(cfg.Template, cfg.Tokens)
		if err != nil {
			t.Fatal(err)
		}
		tmpls = append(tmpls, tmpl)
	}
	f, err := os.Open(filepath.Join(testdata, "tokenizer-refs", "chat_template_cases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		n++
		var c chatCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		opt := Options{AddGenerationPrompt: c.AddGenerationPrompt, EnableThinking: c.EnableThinking}
		if string(c.Tools) != "null" {
			opt.Tools = c.Tools
		}
		for i, tmpl := range tmpls {
			got, err := tmpl.RenderJSON(c.Messages, opt)
			if err != nil {
				t.Fatalf("case %d template %d: %v", n, i, err)
			}
			if got != c.Rendered {
				t.Fatalf("case %d template %d:\n got %q\nwant %q", n, i, got, c.Rendered)
			}
		}
		if ids := qwen.Encode(c.Rendered); !slices.Equal(ids, c.IDs) {
			t.Errorf("case %d qwen3 ids:\n got %v\nwant %v", n, ids, c.IDs)
		}
		if ids := tiny.Encode(c.Rendered); !slices.Equal(ids, c.IDsTinyGo) {
			t.Errorf("case %d tiny-go ids:\n got %v\nwant %v", n, ids, c.IDsTinyGo)
		}
	}
	if n != 30 {
		t.Fatalf("%d conversations, want 30", n)
	}
}

// TestErrorsNameTheLine: a template's raise_exception, an unknown filter and
// an unclosed block are reported with the line they are on.
func TestErrorsNameTheLine(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"a\n{%- if messages|length == 0 %}\n  {{ raise_exception('no messages') }}\n{%- endif %}", "line 3: no messages"},
		{"a\nb\n\n{{ messages | frobnicate }}", "line 4"},
		{"x\n{% for m in messages %}\n{% if m %}\n{% endif %}", "line 2"},
	} {
		tmpl, err := Compile(c.src, SpecialTokens{})
		if err == nil {
			_, err = tmpl.Render(nil, Options{})
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("template %q: error %v, want one naming %q", c.src, err, c.want)
		}
	}
}

// TestSpecialTokensAndConfig: bos/eos strings reach the template and
// generation_config's eos ids are read.
func TestSpecialTokensAndConfig(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join(testdata, "tokenizer-refs", "qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tokens.EOS != "<|im_end|>" || cfg.Tokens.PAD != "<|endoftext|>" || cfg.Tokens.BOS != "" || cfg.AddBOS {
		t.Fatalf("qwen3 tokens %+v add_bos %v", cfg.Tokens, cfg.AddBOS)
	}
	tmpl, err := Compile("{{ bos_token is defined }}|{{ eos_token }}|{{ messages[0].content }}", cfg.Tokens)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render([]Message{{"user", "hi"}}, Options{})
	if err != nil || got != "False|<|im_end|>|hi" {
		t.Fatalf("got %q, %v", got, err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"eos_token_id": [0, 2], "pad_token_id": 0}`), 0o644)
	cfg, err = LoadConfig(dir)
	if err != nil || !slices.Equal(cfg.EOSTokenIDs, []int{0, 2}) || cfg.PadTokenID == nil || *cfg.PadTokenID != 0 {
		t.Fatalf("generation config: %+v %v", cfg, err)
	}
}

// TestToJSONIsPythons: tojson writes what transformers' tojson
// (json.dumps(x, ensure_ascii=False)) writes — whole floats with ".0",
// Python's exponent form, U+2028 and non-ASCII unescaped, key order kept;
// the expected string is Python 3's output for this value.
func TestToJSONIsPythons(t *testing.T) {
	tmpl, err := Compile("{{- tools | tojson }}|{{ tools[0].f|tojson }}", SpecialTokens{})
	if err != nil {
		t.Fatal(err)
	}
	tools := `[{"z": 1.0, "a": 1e16, "m": 1e15, "b": 0.00001, "c": 0.0001, "d": 1.5e-7, "e": 123456789.0, "g": -0.0,
		"h": 0.1, "i": 5, "j": [true, false, null], "f": "\u2028é\u0001\"\\/\t<>&"}]`
	got, err := tmpl.Render(nil, Options{Tools: json.RawMessage(tools)})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"z": 1.0, "a": 1e+16, "m": 1000000000000000.0, "b": 1e-05, "c": 0.0001, "d": 1.5e-07, "e": 123456789.0, "g": -0.0, ` +
		`"h": 0.1, "i": 5, "j": [true, false, null], "f": "` + "\u2028" + `é\u0001\"\\/\t<>&"}]|"` + "\u2028" + `é\u0001\"\\/\t<>&"`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestPrintIsPythons: {{ x }} prints None as "None" and whole floats with
// ".0", as Python's Jinja does; strings, ints, bools and undefined print as
// before.
func TestPrintIsPythons(t *testing.T) {
	tmpl, err := Compile("{{ messages[0].content }}|{{ tools[0].a }}|{{ tools[0].b }}|{{ tools[0].c }}|{{ tools[0].d }}|{{ tools[0].e }}|{{ tools[0].nope }}|{{ messages[0]['role'] }}", SpecialTokens{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.RenderJSON(json.RawMessage(`[{"role": "tool", "content": null}]`),
		Options{Tools: json.RawMessage(`[{"a": 2.0, "b": 1e-7, "c": 7, "d": true, "e": "s"}]`)})
	if err != nil {
		t.Fatal(err)
	}
	if want := "None|2.0|1e-07|7|True|s||tool"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
