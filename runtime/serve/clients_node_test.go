package serve

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/load"
)

// structuredCases are the cases each npm client runs at the same time as
// the other (testdata/clients/CLIENT.cjs).
var structuredCases = map[string][]string{
	"openai": {"jsonSchema", "forcedTool", "namedTool", "logprobs"},
	"aisdk":  {"jsonSchema", "forcedTool", "namedTool", "logprobs"},
}

// clientResult is what a structured case reports.
type clientResult struct {
	Content string `json:"content"`
	Finish  string `json:"finish"`
	Calls   []struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"calls"`
	Tokens []struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
		Top     []struct {
			Token   string  `json:"token"`
			Logprob float64 `json:"logprob"`
		} `json:"top"`
	} `json:"tokens"`
	Error string `json:"error"`
}

var (
	chatLaneOnce sync.Once
	chatLanes    []*engine.Lane
	chatLaneErr  error
)

// startChatParallel serves tiny-go-chat with two sessions of their own
// state taking turns (--parallel 2).
func startChatParallel(t *testing.T) *httptest.Server {
	m := loadChat(t)
	m.mu.Lock() // a lane is added to the model no server is using
	chatLaneOnce.Do(func() {
		var l *engine.Lane
		l, chatLaneErr = m.l.Model.NewLane()
		chatLanes = []*engine.Lane{m.l.Model.Lane(), l}
	})
	m.mu.Unlock()
	if chatLaneErr != nil {
		t.Fatal(chatLaneErr)
	}
	ts, _ := startChat(t, chatLanes...)
	return ts
}

// TestNodeClientsAtOnce: the openai client and the Vercel AI SDK, two node
// processes at the same time against one server of two sessions, each ask
// the chat model for a weather report under a JSON schema (the AI SDK's
// generateObject with a zod schema, which validates the reply itself) and
// force a tool call on small talk that needs none (tool_choice
// "required") and a call of read_file on the weather question (a named
// function); and each asks for a reply with logprobs (the openai client
// streamed, the AI SDK through its OpenAI provider's chat model). The
// reports must parse and follow the schema, the forced calls name an
// offered tool with the arguments its parameters ask for, and the logprobs
// be a distribution's: each token's among its alternatives, the most
// likely first (the reply is greedy, so the chosen token is the first).
func TestNodeClientsAtOnce(t *testing.T) {
	for name := range structuredCases {
		for _, p := range nodeClientPackages(name) {
			needNode(t, p)
		}
	}
	ts := startChatParallel(t)
	cases := structuredCases
	if raceEnabled { // 45 s under the race detector: the two clients at once, a case each that needs the grammar
		cases = map[string][]string{"openai": {"jsonSchema"}, "aisdk": {"namedTool"}}
	}
	var wg sync.WaitGroup
	results := map[string]map[string]clientResult{}
	errs := map[string]error{}
	var mu sync.Mutex
	for name, cases := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			raw, err := exec.Command("node", append([]string{"testdata/clients/run.cjs", name, ts.URL, load.TinyGoChat}, cases...)...).Output()
			var res map[string]clientResult
			if err == nil {
				err = json.Unmarshal(raw, &res)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[name] = fmt.Errorf("%v: %s", err, raw)
				return
			}
			results[name] = res
		}()
	}
	wg.Wait()
	for name, err := range errs {
		t.Fatalf("%s: %v", name, err)
	}
	for name, cases := range cases {
		for _, c := range cases {
			r, ok := results[name][c]
			switch {
			case !ok:
				t.Errorf("%s %s: no result", name, c)
				continue
			case r.Error != "":
				t.Errorf("%s %s: %s", name, c, r.Error)
				continue
			}
			var err error
			switch c {
			case "jsonSchema":
				err = checkReport(r)
			case "forcedTool":
				err = checkForcedCall(r, "")
			case "namedTool":
				err = checkForcedCall(r, "read_file")
			case "logprobs":
				err = checkLogprobs(r)
			}
			if err != nil {
				t.Errorf("%s %s: %v", name, c, err)
			}
		}
	}
	t.Logf("reports: openai %s, aisdk %s; forced calls: %+v, %+v", results["openai"]["jsonSchema"].Content, results["aisdk"]["jsonSchema"].Content,
		results["openai"]["forcedTool"].Calls, results["aisdk"]["forcedTool"].Calls)
}

// nodeClientPackages are the npm packages a client's case file needs.
func nodeClientPackages(name string) []string {
	for _, c := range nodeClients {
		if c.name == name {
			return c.packages
		}
	}
	return nil
}

// checkReport: the reply is one JSON object with exactly the schema's keys
// (testdata/clients/weather.cjs reportSchema), of its types and bounds.
func checkReport(r clientResult) error {
	dec := json.NewDecoder(strings.NewReader(r.Content))
	dec.UseNumber()
	var o map[string]any
	if err := dec.Decode(&o); err != nil {
		return fmt.Errorf("the reply %q is no JSON object: %v", r.Content, err)
	}
	if dec.More() {
		return fmt.Errorf("the reply %q has more after the object", r.Content)
	}
	if len(o) != 3 {
		return fmt.Errorf("the reply %q has %d keys, want city, temp_c and condition", r.Content, len(o))
	}
	city, ok := o["city"].(string)
	if !ok || len([]rune(city)) > 40 {
		return fmt.Errorf("city %v: want a string of at most 40 characters", o["city"])
	}
	n, ok := o["temp_c"].(json.Number)
	if _, err := n.Int64(); !ok || err != nil {
		return fmt.Errorf("temp_c %v: want an integer", o["temp_c"])
	}
	if c, _ := o["condition"].(string); !slices.Contains([]string{"sunny", "cloudy", "raining", "snowing"}, c) {
		return fmt.Errorf("condition %v: not one of the enum", o["condition"])
	}
	if r.Finish != "stop" {
		return fmt.Errorf("finish reason %q, want stop (the object is complete)", r.Finish)
	}
	return nil
}

// checkForcedCall: one call of an offered tool (of name, if given: the
// weather question would get get_weather) whose arguments are an object
// with exactly its parameter, a string.
func checkForcedCall(r clientResult, name string) error {
	params := map[string]string{"get_weather": "city", "read_file": "path"}
	if len(r.Calls) != 1 {
		return fmt.Errorf("%d calls, want one (tool_choice required, parallel calls not asked for)", len(r.Calls))
	}
	c := r.Calls[0]
	p, ok := params[c.Name]
	if !ok || name != "" && c.Name != name {
		return fmt.Errorf("a call of %q: want %q, one of the offered tools", c.Name, name)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
		return fmt.Errorf("arguments %q: %v", c.Arguments, err)
	}
	if _, ok := args[p].(string); !ok || len(args) != 1 {
		return fmt.Errorf("arguments %q: want exactly {%q: string}", c.Arguments, p)
	}
	return nil
}

// checkLogprobs: the tokens spell the reply, each a log probability, with
// three alternatives most likely first, the (greedy) token the first.
func checkLogprobs(r clientResult) error {
	if len(r.Tokens) == 0 {
		return fmt.Errorf("no logprobs for %q", r.Content)
	}
	var text strings.Builder
	for i, tk := range r.Tokens {
		text.WriteString(tk.Token)
		if tk.Logprob > 0 || math.IsNaN(tk.Logprob) {
			return fmt.Errorf("token %d %q: logprob %v", i, tk.Token, tk.Logprob)
		}
		if len(tk.Top) != 3 {
			return fmt.Errorf("token %d %q: %d alternatives, want 3", i, tk.Token, len(tk.Top))
		}
		for k := 1; k < len(tk.Top); k++ {
			if tk.Top[k].Logprob > tk.Top[k-1].Logprob {
				return fmt.Errorf("token %d: alternatives not most likely first: %+v", i, tk.Top)
			}
		}
		if tk.Top[0].Token != tk.Token || tk.Top[0].Logprob != tk.Logprob {
			return fmt.Errorf("token %d %q (%v): greedy, so it must be the first alternative, %+v", i, tk.Token, tk.Logprob, tk.Top[0])
		}
	}
	// The reply's tokens include Qwen3's think block, which the server
	// returns apart (reasoning), so they spell it and then the content.
	if !strings.HasSuffix(text.String(), r.Content) || !strings.HasPrefix(text.String(), "<think>") {
		return fmt.Errorf("the tokens spell %q, the content is %q", text.String(), r.Content)
	}
	return nil
}
