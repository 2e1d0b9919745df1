package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strata-llm/strata/runtime/format/gguf"
)

// startServe runs strata serve with args (and --port 0) until the test
// ends; it returns the server's address and what it printed.
func startServe(t *testing.T, args ...string) (url string, stderr *lockedBuffer) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	old := serveSignal
	serveSignal = func() (context.Context, context.CancelFunc) { return ctx, stop }
	stderr = &lockedBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(append([]string{"serve", "--port", "0"}, args...), io.Discard, stderr) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("strata serve did not stop")
		}
		serveSignal = old
	})
	addr := regexp.MustCompile(`on http://(\S+) `)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if m := addr.FindStringSubmatch(stderr.String()); m != nil {
			return "http://" + m[1], stderr
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("strata serve ended with %d: %s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("strata serve did not start: %s", stderr.String())
		}
	}
}

// post sends a JSON body and returns the status and the body.
func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// --context is the limit also when the artifact that serves was made for a
// longer context (the default model's 4096): a prompt, a generation and a
// server all stop at the user's number, and say it.
func TestContextFlagIsTheLimit(t *testing.T) {
	defer noGenerate()() // the compiled-in 4096-token artifact serves every --context
	_, stderr, status := runStrata(t, "run", "--context", "1")
	if status != 1 || !strings.Contains(stderr, "the prompt is 16 tokens, but model tiny-go runs with a context of 1 tokens") {
		t.Errorf("run --context 1 on the 16-token default prompt: status %d, %s", status, stderr)
	}
	out, stderr, status := runStrata(t, "run", "--context", "8", "--tokens", "1,2,3", "-n", "100", "--ignore-eos")
	if status != 1 || !strings.Contains(stderr, "after 6 generated tokens (printed): context length exceeded: 9 tokens after this window, but model tiny-go runs with a context of 8 tokens") {
		t.Errorf("run --context 8 -n 100: status %d, %s", status, stderr)
	}
	if ids := strings.Fields(out); len(ids) != 6 {
		t.Errorf("run --context 8 with 3 prompt tokens printed %q; want the 6 tokens that fit", out)
	}
	url, serr := startServe(t, "--context", "64")
	if !strings.Contains(serr.String(), "context 64 tokens") {
		t.Errorf("serve --context 64 announces %q", serr.String())
	}
	code, body := post(t, url+"/v1/completions", `{"prompt":"`+strings.Repeat("func main() { ", 20)+`","max_tokens":1}`)
	if code != http.StatusBadRequest || !strings.Contains(body, "64") {
		t.Errorf("serve --context 64, a prompt longer than 64 tokens: %d %s", code, body)
	}
}

// A prompt longer than the context is refused before anything runs, not
// after prefilling all of it that fits.
func TestLongPromptRefusedFirst(t *testing.T) {
	f := filepath.Join(t.TempDir(), "long.go")
	if err := os.WriteFile(f, []byte(strings.Repeat("func (s *Server) Close() error { return nil }\n", 400)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, status := runStrata(t, "run", "-f", f, "-n", "1")
	if status != 1 || !regexp.MustCompile(`context length exceeded: the prompt is \d+ tokens, but model tiny-go runs with a context of 4096 tokens`).MatchString(stderr) {
		t.Errorf("run -f (a prompt over 4096 tokens): status %d, %s", status, stderr)
	}
}

// corruptGGUF writes tiny-go as a GGUF and overwrites 64 KiB of the first
// tensor of layer that large (not an expert's, not a norm) with random
// bytes.
func corruptGGUF(t *testing.T, layer int) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "tiny-go.gguf")
	if _, stderr, status := runStrata(t, "convert", "--hf", tinyGo, "-o", out); status != 0 {
		t.Fatalf("convert: %d %s", status, stderr)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	var at, size int64 = -1, 0
	for i, ti := range f.Tensors {
		if strings.HasPrefix(ti.Name, fmt.Sprintf("blk.%d.", layer)) && !strings.Contains(ti.Name, "exps") && !strings.Contains(ti.Name, "norm") {
			end := f.DataOffset + ti.Offset + 64<<10
			if i+1 < len(f.Tensors) && f.DataOffset+f.Tensors[i+1].Offset < end {
				continue // too small
			}
			at, size = f.DataOffset+ti.Offset, 64<<10
			break
		}
	}
	f.Close()
	if at < 0 {
		t.Fatalf("no tensor of 64 KiB in blk.%d", layer)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := at; i < at+size; i++ {
		b[i] = byte(r.Uint32())
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// Corrupt weights that make the logits NaN stop the run with an error
// naming the position; the server answers with an error, streamed or not.
func TestNonFiniteLogitsFail(t *testing.T) {
	// The layer named is the first whose state or caches went non-finite:
	// the corrupt one, or the one after when the fault comes after them.
	g := corruptGGUF(t, 4)
	out, stderr, status := runStrata(t, "run", "--gguf", g, "-p", "func main() {", "-n", "4", "--ignore-eos")
	if status != 1 || !regexp.MustCompile(`the logits at position \d: non-finite logits: token \d+'s logit is NaN .*; layer [45] is the first whose (state|cache)`).MatchString(stderr) {
		t.Errorf("run on a corrupt GGUF: status %d, stdout %q, stderr %s", status, out, stderr)
	}
	t.Logf("run: %s", stderr)
	url, _ := startServe(t, "--gguf", g)
	code, body := post(t, url+"/v1/completions", `{"prompt":"func main() {","max_tokens":4}`)
	if code == http.StatusOK || !strings.Contains(body, "non-finite logits") {
		t.Errorf("serve, corrupt weights: %d %s", code, body)
	}
	code, body = post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true}`)
	if !strings.Contains(body, `"error":`) || !strings.Contains(body, "non-finite logits") || strings.Contains(body, "[DONE]") && !strings.Contains(body, "error") {
		t.Errorf("serve, corrupt weights, streamed: %d %s", code, body)
	}
}
