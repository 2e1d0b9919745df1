package serve

import (
	"math"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strata-llm/strata/internal/bytemodel"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/text"
)

const imEnd = 258 // <|im_end|> in bytemodel's byte-level tokenizer

// realModel is tiny-a with the byte-level tokenizer, loaded once.
type realModel struct {
	dir string
	l   *load.Loaded
	tm  *text.Model
	mu  sync.Mutex // one server at a time uses the model's memory
}

var (
	realOnce sync.Once
	real     *realModel
	realErr  error
)

func loadReal(t testing.TB) *realModel {
	t.Helper()
	realOnce.Do(func() {
		d, err := os.MkdirTemp("", "serve-test-")
		if err == nil {
			err = bytemodel.Write(d, "../..") // the server runs the real engine
		}
		if err != nil {
			realErr = err
			return
		}
		l, err := load.HF(d, withGenerator(load.Options{Context: 1024}))
		if err != nil {
			realErr = err
			return
		}
		tm, err := text.FromHF(d)
		if err != nil {
			realErr = err
			return
		}
		real = &realModel{dir: d, l: l, tm: tm}
	})
	if realErr != nil {
		t.Fatal(realErr)
	}
	return real
}

// options are a server's options over the real model.
func (m *realModel) options() Options {
	return Options{Model: "tiny", Text: m.tm, Context: m.l.Config.Runtime.ContextLength, Vocab: m.l.Config.Architecture.VocabSize,
		NewSession: func() Session { return EngineSession(m.l.Model.NewSession()) },
		Generate:   engine.GenerateOptions{PrefillRows: m.l.PrefillRows}, Queue: 16, Timeout: time.Minute}
}

// startReal serves the real model with opt (from options) until the test ends.
func startReal(t *testing.T, edit func(*Options)) (*httptest.Server, *realModel) {
	m := loadReal(t)
	m.mu.Lock()
	opt := m.options()
	if edit != nil {
		edit(&opt)
	}
	s, err := New(opt)
	if err != nil {
		m.mu.Unlock()
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		s.Close()
		m.mu.Unlock()
	})
	return ts, m
}

// greedy runs the engine directly: the reference a server reply must match.
func (m *realModel) greedy(t *testing.T, prompt []int, n int) []int {
	t.Helper()
	s := m.l.Model.NewSession()
	out, err := s.Generate(prompt, n, engine.GenerateOptions{PrefillRows: m.l.PrefillRows, EOS: m.tm.StopIDs()})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fakeSession replays reply (cycled) as the generated tokens, calling
// OnToken as the engine does and keeping the position as the engine does.
type fakeSession struct {
	mu    *sync.Mutex
	pos   int
	reply []int
	delay time.Duration
	fed   *[][]int    // every prompt fed, shared by the sessions of one test
	hook  func([]int) // called with each prompt before generating (may panic or block)
}

func (f *fakeSession) Pos() int { return f.pos }

// Mark and Rewind keep only the position: a fake has no other state.
func (f *fakeSession) Mark() any { return f.pos }

func (f *fakeSession) Rewind(m any) error {
	f.pos = m.(int)
	return nil
}

func (f *fakeSession) Generate(prompt []int, n int, opt engine.GenerateOptions) ([]int, error) {
	f.mu.Lock()
	*f.fed = append(*f.fed, slices.Clone(prompt))
	f.mu.Unlock()
	if f.hook != nil {
		f.hook(prompt)
	}
	f.pos += len(prompt)
	var out []int
	for i := 0; i < n; i++ {
		if i > 0 {
			f.pos++
			time.Sleep(f.delay)
		}
		tok := f.reply[i%len(f.reply)]
		out = append(out, tok)
		if opt.OnTokenLogits != nil {
			opt.OnTokenLogits(tok, fakeRow(tok))
		}
		if err := opt.OnToken(tok); err != nil {
			if err == engine.ErrStop {
				break
			}
			return out, err
		}
		if !opt.IgnoreEOS && slices.Contains(opt.EOS, tok) {
			break
		}
	}
	return out, nil
}

// fakeRow is the fake sessions' row of logits for tok: probability 0.3 for
// tok, 0.5 for 'Q' (the reply is not the argmax, as sampled), 0.2 for 'Z',
// 0 (logit −∞) for the rest of 512 ids.
func fakeRow(tok int) []float32 {
	row := make([]float32, 512)
	for i := range row {
		row[i] = float32(math.Inf(-1))
	}
	row[tok], row['Q'], row['Z'] = float32(math.Log(0.3)), float32(math.Log(0.5)), float32(math.Log(0.2))
	return row
}
