package serve

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
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
// probability 0.5, 'Q' 0.3 and 'Z' 0.2 (fakeRow), chat's logprobs.content
// and /v1/completions' legacy logprobs carry exactly those numbers, for the
// reply's text tokens only (not the end of turn, not a stop string's),
// streamed and not; −∞ is −9999.
func TestLogprobsFake(t *testing.T) {
	f := startFake(t, "abcd", 0, nil, nil)
	lnH, lnQ, lnZ := math.Log(0.5), math.Log(0.3), math.Log(0.2)
	const tol = 1e-6

	// Chat, not streamed: top_logprobs 4 lists a reply token, Q, Z and the
	// lowest id of probability 0.
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
		if e.Token != want || !near(e.Logprob, lnH, tol) || !slices.Equal(e.Bytes, []int{int(want[0])}) || len(e.TopLogprobs) != 4 {
			t.Fatalf("chat token %d: %+v", i, e)
		}
		top := e.TopLogprobs
		if top[0].Token != want || !near(top[0].Logprob, lnH, tol) || top[1].Token != "Q" || !near(top[1].Logprob, lnQ, tol) ||
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
	_, b, _ = post(t, f.ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`)
	if !strings.Contains(string(b), `"logprobs":null`) {
		t.Errorf("no logprobs asked: %s", b)
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
		if text != "ab" || !slices.Equal(toks, []string{"a", "b"}) || !slices.Equal(offs, []int{0, 1}) || len(lps) != 2 || !near(lps[1], lnH, tol) {
			t.Fatalf("%s: text %q, tokens %q, offsets %v, logprobs %v: %s", body, text, toks, offs, lps, b)
		}
		keys, vals := objectInOrder(t, tops[1])
		if !slices.Equal(keys, []string{"b", "Q"}) || !near(vals[0], lnH, tol) || !near(vals[1], lnQ, tol) {
			t.Errorf("%s: top_logprobs[1] %s, want {b: ln 0.5, Q: ln 0.3}", body, tops[1])
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
	// logprobs 0: only the sampled token in each dict (OpenAI's rule).
	_, b, _ = post(t, f.ts.URL+"/v1/completions", `{"prompt":"x","logprobs":0}`)
	r2 := decode[lpTextReply](t, b)
	if keys, _ := objectInOrder(t, r2.Choices[0].Logprobs.TopLogprobs[2]); !slices.Equal(keys, []string{"c"}) {
		t.Errorf("logprobs 0: %s", b)
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
