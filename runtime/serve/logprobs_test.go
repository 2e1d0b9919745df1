package serve

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/strata-llm/strata/internal/reftensor"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/text"
)

// The response shapes with logprobs, as a client decodes them.
type lpChatReply struct {
	Choices []struct {
		Index    int
		Message  *message
		Delta    *message
		Logprobs *struct {
			Content []struct {
				Token       string
				Logprob     float64
				Bytes       []int
				TopLogprobs []struct {
					Token   string
					Logprob float64
					Bytes   []int
				} `json:"top_logprobs"`
			}
		}
		FinishReason *string `json:"finish_reason"`
	}
	Usage *usage
}

type lpTextReply struct {
	Choices []struct {
		Index    int
		Text     string
		Logprobs *struct {
			Tokens        []string
			TokenLogprobs []float64         `json:"token_logprobs"`
			TopLogprobs   []json.RawMessage `json:"top_logprobs"`
			TextOffset    []int             `json:"text_offset"`
		}
		FinishReason *string `json:"finish_reason"`
	}
	Usage *usage
}

// near reports |a − b| ≤ tol.
func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// TestLogprobsFake: over fake sessions whose rows give each reply token
// probability 0.3, 'Q' 0.5 and 'Z' 0.2 (fakeRow), chat's logprobs.content
// and /v1/completions' legacy logprobs carry exactly those numbers, for the
// reply's text tokens only (not the end of turn, not a stop string's),
// streamed and not; −∞ is −9999.
func TestLogprobsFake(t *testing.T) {
	f := startFake(t, "abcd", 0, nil, nil)
	lnT, lnQ, lnZ := math.Log(0.3), math.Log(0.5), math.Log(0.2)
	const tol = 1e-6

	// Chat, not streamed: top_logprobs 4 lists Q, the reply token, Z and
	// the lowest id of probability 0.
	code, b, _ := post(t, f.ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":4}`)
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	r := decode[lpChatReply](t, b)
	c := r.Choices[0]
	if *c.Message.Content != "abcd" || c.Logprobs == nil || len(c.Logprobs.Content) != 4 {
		t.Fatalf("chat: %s", b)
	}
	for i, e := range c.Logprobs.Content {
		want := string("abcd"[i])
		if e.Token != want || !near(e.Logprob, lnT, tol) || !slices.Equal(e.Bytes, []int{int(want[0])}) || len(e.TopLogprobs) != 4 {
			t.Fatalf("chat token %d: %+v", i, e)
		}
		top := e.TopLogprobs
		if top[0].Token != "Q" || !near(top[0].Logprob, lnQ, tol) || top[1].Token != want || !near(top[1].Logprob, lnT, tol) ||
			top[2].Token != "Z" || !near(top[2].Logprob, lnZ, tol) || top[3].Logprob != -9999 || !slices.Equal(top[3].Bytes, []int{0}) {
			t.Errorf("chat token %d: top_logprobs %+v", i, top)
		}
	}
	// logprobs without top_logprobs: the tokens with empty lists; without
	// logprobs: null.
	_, b, _ = post(t, f.ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"logprobs":true}`)
	if r := decode[lpChatReply](t, b); len(r.Choices[0].Logprobs.Content) != 4 || len(r.Choices[0].Logprobs.Content[0].TopLogprobs) != 0 {
		t.Errorf("logprobs without top_logprobs: %s", b)
	}
	for _, body := range []string{`{"messages":[{"role":"user","content":"hi"}]}`, `{"messages":[{"role":"user","content":"hi"}],"logprobs":false,"top_logprobs":0}`} {
		_, b, _ = post(t, f.ts.URL+"/v1/chat/completions", body)
		if !strings.Contains(string(b), `"logprobs":null`) {
			t.Errorf("no logprobs asked: %s", b)
		}
	}

	// Completions with a stop string: the tokens before it; each top dict
	// most likely first, the sampled token in it.
	for _, stream := range []bool{false, true} {
		body := `{"prompt":"x","logprobs":2,"stop":"cd","stream":` + map[bool]string{false: "false", true: "true"}[stream] + `}`
		code, b, _ := post(t, f.ts.URL+"/v1/completions", body)
		if code != 200 {
			t.Fatalf("%s: %d %s", body, code, b)
		}
		var text string
		var toks []string
		var lps []float64
		var offs []int
		var tops []json.RawMessage
		replies := []lpTextReply{}
		if stream {
			for _, ev := range events(t, b) {
				if ev != "[DONE]" {
					replies = append(replies, decode[lpTextReply](t, []byte(ev)))
				}
			}
		} else {
			replies = append(replies, decode[lpTextReply](t, b))
		}
		for _, r := range replies {
			for _, c := range r.Choices {
				text += c.Text
				if lp := c.Logprobs; lp != nil {
					toks, lps, offs, tops = append(toks, lp.Tokens...), append(lps, lp.TokenLogprobs...), append(offs, lp.TextOffset...), append(tops, lp.TopLogprobs...)
					if stream && c.Text != strings.Join(lp.Tokens, "") {
						t.Errorf("%s: a chunk's text %q, its tokens %q", body, c.Text, lp.Tokens)
					}
				}
			}
		}
		if text != "ab" || !slices.Equal(toks, []string{"a", "b"}) || !slices.Equal(offs, []int{0, 1}) || len(lps) != 2 || !near(lps[1], lnT, tol) {
			t.Fatalf("%s: text %q, tokens %q, offsets %v, logprobs %v: %s", body, text, toks, offs, lps, b)
		}
		keys, vals := objectInOrder(t, tops[1])
		if !slices.Equal(keys, []string{"Q", "b"}) || !near(vals[0], lnQ, tol) || !near(vals[1], lnT, tol) {
			t.Errorf("%s: top_logprobs[1] %s, want {Q: ln 0.5, b: ln 0.3}", body, tops[1])
		}
	}
	// A stop string's prefix held back, then released in part: each token's
	// logprobs go out with the text its first byte is in, or not at all.
	g := startFake(t, "aaab", 0, nil, nil)
	_, b, _ = post(t, g.ts.URL+"/v1/completions", `{"prompt":"x","logprobs":1,"stop":"aab","stream":true}`)
	var text string
	for _, ev := range events(t, b) {
		if ev == "[DONE]" {
			continue
		}
		for _, c := range decode[lpTextReply](t, []byte(ev)).Choices {
			text += c.Text
			if c.Logprobs != nil && strings.Join(c.Logprobs.Tokens, "") != c.Text {
				t.Errorf("stop aab: a chunk's text %q, its tokens %q", c.Text, c.Logprobs.Tokens)
			}
		}
	}
	if text != "a" {
		t.Errorf("stop aab: %q: %s", text, b)
	}
	// logprobs 0: only the sampled token in each dict (OpenAI's rule); 1:
	// the likeliest and the sampled one.
	_, b, _ = post(t, f.ts.URL+"/v1/completions", `{"prompt":"x","logprobs":0}`)
	r2 := decode[lpTextReply](t, b)
	if keys, _ := objectInOrder(t, r2.Choices[0].Logprobs.TopLogprobs[2]); !slices.Equal(keys, []string{"c"}) {
		t.Errorf("logprobs 0: %s", b)
	}
	_, b, _ = post(t, f.ts.URL+"/v1/completions", `{"prompt":"x","logprobs":1}`)
	r2 = decode[lpTextReply](t, b)
	if keys, _ := objectInOrder(t, r2.Choices[0].Logprobs.TopLogprobs[2]); !slices.Equal(keys, []string{"Q", "c"}) {
		t.Errorf("logprobs 1: %s", b)
	}
}

// objectInOrder reads a JSON object's keys and number values in the order
// written.
func objectInOrder(t *testing.T, raw []byte) ([]string, []float64) {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(string(raw)))
	var keys []string
	var vals []float64
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", raw)
	}
	for d.More() {
		k, _ := d.Token()
		v, err := d.Token()
		if err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		keys, vals = append(keys, k.(string)), append(vals, v.(float64))
	}
	return keys, vals
}

// TestLogprobsTinyGoReference serves tiny-go (the trained model) and checks
// /v1/completions' logprobs on its reference greedy path (16 prompt tokens,
// 48 generated, EOS ignored as in the reference) against HF's float64 logits:
// each token's logprob and its top 5 are the log-softmax of the reference
// row, within twice the per-logit bound the engine meets (5e-4). Plain
// decoding and speculative decoding (suffix and MTP drafts, so the rows
// come from verified windows), streamed and not.
func TestLogprobsTinyGoReference(t *testing.T) {
	const dir, prompt, k, tol = "../../models/tiny-go", 16, 5, 1e-3
	f := reftensor.Open(t, dir+"/reference.safetensors")
	greedy, rows := f.Ints("greedy_tokens"), f.Rows("greedy_logits")
	l, err := load.HF(dir, withGenerator(load.Options{Context: 256}))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tm, err := text.FromHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The reference's log-softmax rows, in float64.
	logSoftmax := func(row []float32) []float64 {
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, float64(v))
		}
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v) - mx)
		}
		out := make([]float64, len(row))
		for i, v := range row {
			out[i] = float64(v) - mx - math.Log(z)
		}
		return out
	}
	for _, c := range []struct {
		name   string
		spec   engine.SpecOptions
		stream bool
	}{{"plain", engine.SpecOptions{}, false}, {"plain streamed", engine.SpecOptions{}, true},
		{"spec", engine.SpecOptions{Depth: 3, SuffixDraft: 3, MTP: true}, false}} {
		stats := &engine.SpecStats{}
		c.spec.Stats = stats
		s, err := New(Options{Model: "tiny-go", Text: tm, Context: 256, Vocab: l.Config.Architecture.VocabSize,
			NewSession: func() Session { return EngineSession(l.Model.NewSession()) },
			Generate:   engine.GenerateOptions{PrefillRows: l.PrefillRows, Spec: c.spec}, Queue: 1})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(s.Handler())
		code, b, _ := post(t, ts.URL+"/v1/completions", fmt.Sprintf(`{"prompt":%s,"max_tokens":%d,"logprobs":%d,"ignore_eos":true,"stream":%v}`,
			idsJSON(greedy[:prompt]), len(greedy)-prompt, k, c.stream))
		ts.Close()
		s.Close()
		if code != 200 {
			t.Fatalf("%s: %d %s", c.name, code, b)
		}
		var text string
		var toks []string
		var lps []float64
		var tops []json.RawMessage
		var offs []int
		replies := []lpTextReply{}
		if c.stream {
			for _, ev := range events(t, b) {
				if ev != "[DONE]" {
					replies = append(replies, decode[lpTextReply](t, []byte(ev)))
				}
			}
		} else {
			replies = append(replies, decode[lpTextReply](t, b))
		}
		for _, r := range replies {
			for _, ch := range r.Choices {
				text += ch.Text
				if lp := ch.Logprobs; lp != nil {
					toks, lps, tops, offs = append(toks, lp.Tokens...), append(lps, lp.TokenLogprobs...), append(tops, lp.TopLogprobs...), append(offs, lp.TextOffset...)
				}
			}
		}
		gen := greedy[prompt:]
		if want := tm.Tok.Decode(gen); text != want || len(lps) != len(gen) {
			t.Fatalf("%s: %q with %d logprobs, want the reference's %q (%d tokens)", c.name, text, len(lps), want, len(gen))
		}
		worst, chars := 0.0, 0
		for i, id := range gen {
			ref := logSoftmax(rows[prompt-1+i]) // the row after greedy[:prompt+i]
			tokText := string(tm.Tok.TokenBytes(id))
			if toks[i] != tokText || offs[i] != chars {
				t.Errorf("%s: token %d: %q at %d, want %q at %d", c.name, i, toks[i], offs[i], tokText, chars)
			}
			chars += utf8.RuneCountInString(tokText)
			worst = math.Max(worst, math.Abs(lps[i]-ref[id]))
			order := make([]int, len(ref))
			for j := range order {
				order[j] = j
			}
			slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(ref[b], ref[a]) })
			keys, vals := objectInOrder(t, tops[i])
			if len(keys) != k {
				t.Fatalf("%s: token %d: top_logprobs %s, want %d entries", c.name, i, tops[i], k)
			}
			for j := range k {
				want := string(tm.Tok.TokenBytes(order[j]))
				if keys[j] != want {
					t.Errorf("%s: token %d: alternative %d is %q, the reference's %q", c.name, i, j, keys[j], want)
				}
				worst = math.Max(worst, math.Abs(vals[j]-ref[order[j]]))
			}
		}
		if worst > tol {
			t.Errorf("%s: worst |logprob − reference| %.3g > %g", c.name, worst, tol)
		}
		if c.spec.Depth > 0 && stats.Accepted == 0 {
			t.Errorf("%s: no draft accepted: the verified rows were not exercised", c.name)
		}
		t.Logf("%s: %d tokens, worst |logprob − reference| over them and their top %d: %.3g; drafts %d fed, %d accepted",
			c.name, len(gen), k, worst, stats.Drafted, stats.Accepted)
	}
}

// BenchmarkLogprobOf: what logprobs cost per generated token on Qwen3's
// vocabulary (151,936 ids): one pass for the maximum and the top k, one
// for the normalizer.
func BenchmarkLogprobOf(b *testing.B) {
	row := make([]float32, 151936)
	for i := range row {
		row[i] = float32(8 * math.Sin(float64(i)*0.618))
	}
	for _, k := range []int{0, 5, 20} {
		b.Run(fmt.Sprintf("top%d", k), func(b *testing.B) {
			for b.Loop() {
				logprobOf(row, 42, k)
			}
		})
	}
}
