package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/strata-llm/strata/models"
)

const tinyAConfig = "../../testdata/oracles/tiny-a/config.json"

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		code, out, errOut := runCLI(args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "import-hf") || !strings.Contains(out, "Example:") {
			t.Errorf("%v: code %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	for _, args := range [][]string{{"help", "import-hf"}, {"import-hf", "--help"}} {
		code, out, _ := runCLI(args...)
		if code != 0 || !strings.Contains(out, "Usage: stratagen import-hf") || !strings.Contains(out, "--context N") {
			t.Errorf("%v: code %d, stdout %q", args, code, out)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "Usage:"},
		{[]string{"frobnicate"}, `stratagen: unknown command "frobnicate"`},
		{[]string{"help", "frobnicate"}, `stratagen: help: unknown command "frobnicate"`},
		{[]string{"import-hf"}, "stratagen: import-hf: expected exactly one config.json path, got 0 arguments"},
		{[]string{"import-hf", "a.json", "b.json"}, "got 2 arguments"},
		{[]string{"import-hf", "--bogus", tinyAConfig}, "stratagen: import-hf: flag provided but not defined: -bogus"},
		{[]string{"import-hf", "--context", "many", tinyAConfig}, `invalid value "many" for flag -context`},
		{[]string{"import-hf", "--context", "-5", tinyAConfig}, "--context is -5 (expected a positive integer)"},
		{[]string{"import-hf", tinyAConfig, "--name"}, "flag needs an argument: -name"},
	} {
		code, out, errOut := runCLI(tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

func TestImportHFWritesModelTOML(t *testing.T) {
	out := filepath.Join(t.TempDir(), "model.toml")
	// Flags after the path work too.
	code, stdout, stderr := runCLI("import-hf", "--name", "tiny-a", tinyAConfig,
		"--context", "256", "--prefill-rows", "16", "--out", out)
	if code != 0 || stdout != "" || stderr != "" {
		t.Fatalf("code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	got, err := models.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := models.Load("../../models/tiny-a/model.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("import-hf output differs from models/tiny-a/model.toml:\n got %+v\nwant %+v", got, want)
	}
}

func TestImportHFToStdoutDefaultsName(t *testing.T) {
	code, stdout, stderr := runCLI("import-hf", tinyAConfig)
	if code != 0 || stderr != "" {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
	c, err := models.Parse([]byte(stdout), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "tiny-a" || c.Runtime.ContextLength != 4096 || c.Windows.PrefillRows != 64 {
		t.Errorf("name %q, context %d, prefill %d", c.Name, c.Runtime.ContextLength, c.Windows.PrefillRows)
	}
	if !strings.HasPrefix(stdout, "# Written by `stratagen import-hf` from "+tinyAConfig+".\n") {
		t.Errorf("header: %q", strings.SplitN(stdout, "\n", 2)[0])
	}
}

func TestImportHFFailures(t *testing.T) {
	dir := t.TempDir()
	llama := filepath.Join(dir, "config.json")
	if err := os.WriteFile(llama, []byte(`{"model_type": "llama"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken.json")
	if err := os.WriteFile(broken, []byte(`{"model_type": `), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(tinyAConfig)
	if err != nil {
		t.Fatal(err)
	}
	noHidden := filepath.Join(dir, "nohidden.json")
	if err := os.WriteFile(noHidden, bytes.Replace(data, []byte(`"hidden_size": 64,`), nil, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	outFile := filepath.Join(dir, "out.toml")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"import-hf", filepath.Join(dir, "missing.json")}, "stratagen: reading HF config: open "},
		{[]string{"import-hf", llama}, `stratagen: ` + llama + `: model_type: "llama" is not supported (supported: qwen3_next, qwen4_exp, qwen4_exp_text)`},
		{[]string{"import-hf", broken}, "stratagen: " + broken + ": not a JSON object"},
		{[]string{"import-hf", "--out", outFile, noHidden}, "stratagen: " + noHidden + ": hidden_size: missing (expected an integer)"},
		{[]string{"import-hf", "--name", "bad/name", tinyAConfig}, `name: is "bad/name"`},
		{[]string{"import-hf", "--out", noHidden, noHidden}, "is an input of this command; refusing to overwrite it"},
	} {
		code, stdout, stderr := runCLI(tc.args...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want 1 and %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
	// The README's line writes into a model folder that does not exist yet.
	nested := filepath.Join(dir, "models", "my-model", "model.toml")
	if code, _, stderr := runCLI("import-hf", "--out", nested, tinyAConfig); code != 0 {
		t.Errorf("import-hf --out into a new folder: code %d: %s", code, stderr)
	} else if _, err := os.Stat(nested); err != nil {
		t.Errorf("import-hf --out into a new folder: %v", err)
	}
	// Every line of a multi-problem report carries the prefix.
	noHiddenNoVocab := filepath.Join(dir, "twoproblems.json")
	two := bytes.Replace(data, []byte(`"hidden_size": 64,`), nil, 1)
	two = bytes.Replace(two, []byte(`"vocab_size": 512`), []byte(`"vocab_size": "512"`), 1)
	if err := os.WriteFile(noHiddenNoVocab, two, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI("import-hf", noHiddenNoVocab)
	want := "stratagen: " + noHiddenNoVocab + ": hidden_size: missing (expected an integer)\n" +
		"stratagen: " + noHiddenNoVocab + `: vocab_size: is "512" (expected an integer)` + "\n"
	if code != 1 || stderr != want {
		t.Errorf("code %d, stderr\n%s\nwant\n%s", code, stderr, want)
	}

	if _, err := os.Stat(outFile); !os.IsNotExist(err) {
		t.Errorf("a failed import wrote %s", outFile)
	}
}
