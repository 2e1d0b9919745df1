package serve

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"github.com/strata-llm/strata/runtime/text/tokenizer"
)

// maxTopLogprobs is the most alternatives a request may ask for per token
// (OpenAI's limit for chat's top_logprobs).
const maxTopLogprobs = 20

// minLogprob stands for a log probability of −∞ (a masked logit), which
// JSON cannot carry; OpenAI's API uses the same value.
const minLogprob = -9999.0

// tokenLogprob is one generated token's log probability under the model's
// raw distribution (the log-softmax of its logits, before the penalties,
// temperature and filters), with the top alternatives, most likely first.
type tokenLogprob struct {
	id  int
	lp  float64
	top []altLogprob
	// start is the token's first byte in the reply's bytes (control tokens
	// left out), offset the characters begun before it.
	start, offset int
}

type altLogprob struct {
	id int
	lp float64
}

// logprobOf is id's log probability in row's log-softmax, and the k most
// likely ids (ties: lower ids first). One pass for the maximum and the top
// k, one for the normalizer.
func logprobOf(row []float32, id, k int) tokenLogprob {
	top := make([]int, 0, k+1)
	mx := float32(math.Inf(-1))
	for i, v := range row {
		mx = max(mx, v)
		if k == 0 || len(top) == k && v <= row[top[k-1]] {
			continue
		}
		// Insert i into top, kept sorted by logit, higher first.
		j := len(top)
		if j < k {
			top = append(top, i)
		} else {
			j--
		}
		for j > 0 && row[top[j-1]] < v {
			top[j] = top[j-1]
			j--
		}
		top[j] = i
	}
	var z float64
	m := float64(mx)
	for _, v := range row {
		z += math.Exp(float64(v) - m)
	}
	lse := m + math.Log(z)
	lp := func(i int) float64 { return max(float64(row[i])-lse, minLogprob) }
	t := tokenLogprob{id: id, lp: lp(id), top: make([]altLogprob, len(top))}
	for i, a := range top {
		t.top[i] = altLogprob{id: a, lp: lp(a)}
	}
	return t
}

// chatLogprob is an entry of a chat choice's logprobs.content.
type chatLogprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []chatTopAlt `json:"top_logprobs"`
}

type chatTopAlt struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type chatLogprobs struct {
	Content []chatLogprob `json:"content"`
}

// tokenText is a token's text and its bytes as the API shows them (the
// text may be part of a character; bytes are exact).
func tokenText(tok *tokenizer.Tokenizer, id int) (string, []int) {
	b := tok.TokenBytes(id)
	ints := make([]int, len(b))
	for i, c := range b {
		ints[i] = int(c)
	}
	return string(b), ints
}

func chatLogprobsOf(tok *tokenizer.Tokenizer, lps []tokenLogprob) *chatLogprobs {
	out := &chatLogprobs{Content: make([]chatLogprob, len(lps))}
	for i, t := range lps {
		s, b := tokenText(tok, t.id)
		e := chatLogprob{Token: s, Logprob: t.lp, Bytes: b, TopLogprobs: make([]chatTopAlt, len(t.top))}
		for k, a := range t.top {
			s, b := tokenText(tok, a.id)
			e.TopLogprobs[k] = chatTopAlt{Token: s, Logprob: a.lp, Bytes: b}
		}
		out.Content[i] = e
	}
	return out
}

// textLogprobs is a /v1/completions choice's logprobs (the legacy shape).
type textLogprobs struct {
	Tokens        []string     `json:"tokens"`
	TokenLogprobs []float64    `json:"token_logprobs"`
	TopLogprobs   []orderedAlt `json:"top_logprobs"`
	TextOffset    []int        `json:"text_offset"`
}

// orderedAlt is one token's {token: logprob} object, written most likely
// first (a Go map would sort the keys).
type orderedAlt struct {
	keys []string
	lps  []float64
}

func (o orderedAlt) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	seen := map[string]bool{}
	for i, k := range o.keys {
		if seen[k] {
			continue // two ids with the same text: the likelier one's
		}
		seen[k] = true
		if len(seen) > 1 {
			b.WriteByte(',')
		}
		key, err := jsonMarshal(k)
		if err != nil {
			return nil, err
		}
		b.Write(key)
		b.WriteByte(':')
		b.WriteString(strconv.FormatFloat(o.lps[i], 'g', -1, 64))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// textLogprobsOf renders lps in the legacy shape.
func textLogprobsOf(tok *tokenizer.Tokenizer, lps []tokenLogprob) *textLogprobs {
	out := &textLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []orderedAlt{}, TextOffset: []int{}}
	for _, t := range lps {
		s, _ := tokenText(tok, t.id)
		out.Tokens = append(out.Tokens, s)
		out.TokenLogprobs = append(out.TokenLogprobs, t.lp)
		var alt orderedAlt
		chosen := false
		for _, a := range t.top {
			s, _ := tokenText(tok, a.id)
			alt.keys, alt.lps = append(alt.keys, s), append(alt.lps, a.lp)
			chosen = chosen || a.id == t.id
		}
		if !chosen {
			// As OpenAI's API: the sampled token is always among them.
			alt.keys, alt.lps = append(alt.keys, s), append(alt.lps, t.lp)
		}
		out.TopLogprobs = append(out.TopLogprobs, alt)
		out.TextOffset = append(out.TextOffset, t.offset)
	}
	return out
}

// logprobsRequest reads the logprobs fields: chat's "logprobs": true with
// "top_logprobs": 0..20, or /v1/completions' "logprobs": 0..20 (the number
// of alternatives). It returns -1 when none are asked for.
func logprobsRequest(raw json.RawMessage, top *int, chat bool) (int, *apiError) {
	off := len(raw) == 0 || string(raw) == "null"
	if chat {
		var on bool
		if !off && json.Unmarshal(raw, &on) != nil {
			return 0, badRequest("logprobs", "invalid_type", "field \"logprobs\": expected a boolean")
		}
		if top == nil {
			if !on {
				return -1, nil
			}
			return 0, nil
		}
		if !on {
			if *top == 0 {
				return -1, nil // some clients send the default along
			}
			return 0, badRequest("top_logprobs", "invalid_value", "field \"top_logprobs\": only with \"logprobs\": true")
		}
		if *top < 0 || *top > maxTopLogprobs {
			return 0, badRequest("top_logprobs", "invalid_value", "field \"top_logprobs\": expected an integer in [0, %d], got %d", maxTopLogprobs, *top)
		}
		return *top, nil
	}
	if off {
		return -1, nil
	}
	var n int
	if json.Unmarshal(raw, &n) != nil {
		return 0, badRequest("logprobs", "invalid_type", "field \"logprobs\": expected an integer (how many alternatives per token, 0 to %d)", maxTopLogprobs)
	}
	if n < 0 || n > maxTopLogprobs {
		return 0, badRequest("logprobs", "invalid_value", "field \"logprobs\": expected an integer in [0, %d], got %d", maxTopLogprobs, n)
	}
	return n, nil
}
