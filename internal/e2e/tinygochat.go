package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-llm/strata/internal/reftensor"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/format/planes"
	"github.com/strata-llm/strata/runtime/load"
)

// TinyGoChatDir returns a folder holding tiny-go-chat
// (models/tiny-go-chat/README.md) as an HF checkpoint named tiny-go-chat
// (WriteTinyGoChat), removed when the test ends.
func TinyGoChatDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), load.TinyGoChat)
	if err := WriteTinyGoChat(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// WriteTinyGoChat makes dir a checkpoint folder of tiny-go-chat: its
// checkpoint decoded from the tree's delta, tiny-go's config and tokenizer
// beside it (the two models share them).
func WriteTinyGoChat(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range load.DefaultModelFiles {
		src := filepath.Join(TinyGoDir(), name)
		if name == "model.safetensors" {
			src = Path("models", "tiny-go-chat", name)
			// The decoded checkpoint in the planes cache, linked: decoding
			// the delta under -race takes seconds.
			if p, err := planes.CachedOSFile(src); err != nil {
				return err
			} else if p != "" && os.Symlink(p, filepath.Join(dir, name)) == nil {
				continue
			}
		}
		b, err := planes.ReadOSFile(src)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// TinyGoChatRef is tiny-go-chat's reference.safetensors: float64 HF logits
// (stored as float32) of a tool conversation at Positions (trunk) and
// MTPPositions (the MTP head), and Greedy, a tool request's generation
// prompt (its first GreedyPrompt tokens) with the 40 greedy tokens after it.
type TinyGoChatRef struct {
	Tokens, Greedy          []int
	GreedyPrompt            int
	Positions, MTPPositions []int
	Logits, MTPLogits       [][]float32
}

// LoadTinyGoChatRef reads tiny-go-chat's reference.
func LoadTinyGoChatRef(t testing.TB) TinyGoChatRef {
	t.Helper()
	f := reftensor.Open(t, Path("models", "tiny-go-chat", "reference.safetensors"))
	return TinyGoChatRef{
		Tokens: f.Ints("tokens"), Greedy: f.Ints("greedy_tokens"), GreedyPrompt: f.Ints("greedy_prompt_len")[0],
		Positions: f.Ints("logits_positions"), MTPPositions: f.Ints("mtp_positions"),
		Logits: f.Rows("logits"), MTPLogits: f.Rows("mtp_logits"),
	}
}

// CheckTinyGoChat runs tiny-go-chat's reference on one backend, within
// tiny-go's bounds: the trunk and MTP rows of a teacher-forced forward of
// the conversation's first rows tokens (all of them when rows ≤ 0), and
// with greedy the tool call decoded token for token after its 193-token
// prompt. The weights are what differ from tiny-go (whose suites check the
// graphs, prefill and decode, on every backend), so the emulator suites
// check one window's rows: the greedy path there costs 30-40 s of emulated
// prefill, and rows within 5e-4 of a reference whose greedy margins are
// ≥ 0.02 (reference.json) decide the same tokens.
func CheckTinyGoChat(t *testing.T, opt load.Options, window, rows int, greedy bool) {
	ref := LoadTinyGoChatRef(t)
	if rows <= 0 || rows > len(ref.Tokens) {
		rows = len(ref.Tokens)
	}
	opt.AllLogits, opt.PrefillRows = true, window
	l, err := load.HF(TinyGoChatDir(t), WithGenerator(opt))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	start := time.Now()
	trunk, mtp, err := l.Model.TeacherForced(ref.Tokens[:rows], window)
	if err != nil {
		t.Fatal(err)
	}
	var at, mtpAt []int
	var want, mtpWant [][]float32
	for i, p := range ref.Positions {
		if p < rows {
			at, want = append(at, p), append(want, ref.Logits[i])
		}
	}
	for i, p := range ref.MTPPositions {
		if p+1 < rows { // the head's row p reads token p+1
			mtpAt, mtpWant = append(mtpAt, p), append(mtpWant, ref.MTPLogits[i])
		}
	}
	w1 := CheckAbs(t, "tokens", Pick(trunk, at), want, at, TinyGoAbsTol)
	w2 := CheckAbs(t, "mtp", Pick(mtp, mtpAt), mtpWant, mtpAt, TinyGoAbsTol)
	forward := time.Since(start)
	if !greedy {
		t.Logf("worst |logit − reference|: tokens %.3g (%d rows), mtp %.3g (%d rows); %d-token forward %v",
			w1, len(at), w2, len(mtpAt), rows, forward.Round(time.Millisecond))
		return
	}

	start = time.Now()
	prompt, path := ref.Greedy[:ref.GreedyPrompt], ref.Greedy[ref.GreedyPrompt:]
	got, err := l.Model.NewSession().Generate(prompt, len(path), engine.GenerateOptions{PrefillRows: window})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range path {
		if i >= len(got) || got[i] != want {
			t.Fatalf("greedy token %d: got %v, want %v", i, got, path)
		}
	}
	t.Logf("worst |logit − reference|: tokens %.3g (%d rows), mtp %.3g (%d rows); greedy tool call equal (%d tokens); %d-token forward %v, decode %v",
		w1, len(at), w2, len(mtpAt), len(got), rows, forward.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}
