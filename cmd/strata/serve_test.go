package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe to write and read from two goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServeCommand: strata serve on a free port answers /health and a chat
// completion on the real engine, and on its signal finishes the request in
// flight, saves the spec gate's state and exits 0.
func TestServeCommand(t *testing.T) {
	dir := t.TempDir()
	byteLevelTokenizer(t, dir)
	gateFile := filepath.Join(t.TempDir(), "gate.spec")
	ctx, stop := context.WithCancel(context.Background())
	old := serveSignal
	serveSignal = func() (context.Context, context.CancelFunc) { return ctx, stop }
	defer func() { serveSignal = old }()
	var stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"serve", "--hf", dir, "--port", "0", "--alias", "tiny", "--queue", "2", "--parallel", "2", "--ignore-eos", "--spec", "auto", "--spec-state", gateFile}, io.Discard, &stderr)
	}()
	addr := regexp.MustCompile(`on http://(\S+) `)
	var url string
	for deadline := time.Now().Add(30 * time.Second); url == ""; time.Sleep(5 * time.Millisecond) {
		if m := addr.FindStringSubmatch(stderr.String()); m != nil {
			url = "http://" + m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("strata serve ended with %d: %s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("strata serve did not start: %s", stderr.String())
		}
	}
	resp, err := http.Get(url + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Post(url+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"completion_tokens":`) || !strings.Contains(string(b), `"model":"tiny"`) {
		t.Errorf("chat: %d %s", resp.StatusCode, b)
	}
	// A request running when the signal comes is finished before the exit.
	type reply struct {
		code int
		body string
	}
	inflight := make(chan reply, 1)
	go func() {
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"long","max_tokens":300}`))
		if err != nil {
			inflight <- reply{0, err.Error()}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		inflight <- reply{resp.StatusCode, string(b)}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "strata_busy 1\n") {
			if !strings.Contains(stderr.String(), "2 sessions of ") || !strings.Contains(string(b), `strata_session_requests_total{session="1"}`) {
				t.Errorf("with --parallel 2, no second session in the banner or /metrics:\n%s\n%s", stderr.String(), b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the long request did not start")
		}
	}
	stop()
	if r := <-inflight; r.code != 200 || !strings.Contains(r.body, `"completion_tokens":300`) {
		t.Errorf("the request in flight at the signal: %d %s", r.code, r.body)
	}
	select {
	case code := <-done:
		if code != 0 || !strings.Contains(stderr.String(), "strata: stopped") {
			t.Errorf("status %d after the signal: %s", code, stderr.String())
		}
		if _, err := os.Stat(gateFile); err != nil {
			t.Errorf("the spec gate's state was not saved at shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("strata serve did not stop")
	}
}

func TestServeFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--hf", "a", "--gguf", "b"}, "two models"},
		{[]string{"--hf", tinyA, "--port", "70000"}, "--port"},
		{[]string{"--hf", tinyA, "--queue", "-1"}, "--queue"},
		{[]string{"--hf", tinyA, "--parallel", "0"}, "--parallel"},
		{[]string{"--hf", tinyA, "--top-p", "0"}, "--top-p"},
		{[]string{"--hf", tinyA, "--cors-origin", "example.com"}, "--cors-origin"},
		{[]string{"--hf", tinyA, "--cors-origin", "https://example.com/app"}, "--cors-origin"},
		{[]string{"--hf", tinyA, "--api-key", ""}, "--api-key"},
	} {
		_, errOut, status := runStrata(t, append([]string{"serve"}, c.args...)...)
		if status != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: status %d, %q; want a usage error naming %s", c.args, status, errOut, c.want)
		}
	}
	// Key files: a missing one, one without keys, one with a spaced line
	// (the error names the line, not its text).
	keys := t.TempDir()
	os.WriteFile(filepath.Join(keys, "empty"), []byte("# none\n\n"), 0o600)
	os.WriteFile(filepath.Join(keys, "spaced"), []byte("good\nsecret words\n"), 0o600)
	for _, c := range []struct{ file, want string }{
		{filepath.Join(keys, "missing"), "no such file"}, {filepath.Join(keys, "empty"), "no key in it"}, {filepath.Join(keys, "spaced"), "line 2"},
	} {
		_, errOut, status := runStrata(t, "serve", "--hf", tinyA, "--api-key-file", c.file)
		if status != 1 || !strings.Contains(errOut, "--api-key-file") || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "secret") {
			t.Errorf("--api-key-file %s: status %d, %q; want an error naming it and %q", c.file, status, errOut, c.want)
		}
	}
	// tiny-a has no tokenizer: the error says what to give.
	_, errOut, status := runStrata(t, "serve", "--hf", tinyA, "--port", "0")
	if status != 1 || !strings.Contains(errOut, "--tokenizer") {
		t.Errorf("no tokenizer: status %d, %q", status, errOut)
	}
}

// TestServeAccessFlags: --api-key and --api-key-file (two keys, a comment
// and a blank line) make every request but /health need a key; --cors-origin
// answers a browser's preflight without one and marks the responses; no key
// shows in the log.
func TestServeAccessFlags(t *testing.T) {
	dir := t.TempDir()
	byteLevelTokenizer(t, dir)
	keyFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keyFile, []byte("# the team's keys\nfile-key-one\n\nfile-key-two\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	old := serveSignal
	serveSignal = func() (context.Context, context.CancelFunc) { return ctx, stop }
	defer func() { serveSignal = old }()
	var stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"serve", "--hf", dir, "--port", "0", "--api-key", "flag-key", "--api-key-file", keyFile,
			"--cors-origin", "http://localhost:5173"}, io.Discard, &stderr)
	}()
	addr := regexp.MustCompile(`on http://(\S+) `)
	var url string
	for deadline := time.Now().Add(30 * time.Second); url == ""; time.Sleep(5 * time.Millisecond) {
		if m := addr.FindStringSubmatch(stderr.String()); m != nil {
			url = "http://" + m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("strata serve ended with %d: %s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("strata serve did not start: %s", stderr.String())
		}
	}
	do := func(method, path, key string, hdr ...string) *http.Response {
		req, _ := http.NewRequest(method, url+path, strings.NewReader(`{"prompt":"hi","max_tokens":2}`))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		for i := 0; i < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, c := range []struct {
		method, path, key string
		status            int
	}{
		{"GET", "/health", "", 200},
		{"POST", "/v1/completions", "", 401},
		{"POST", "/v1/completions", "wrong", 401},
		{"POST", "/v1/completions", "flag-key", 200},
		{"POST", "/v1/completions", "file-key-one", 200},
		{"POST", "/v1/completions", "file-key-two", 200},
		{"GET", "/metrics", "", 401},
	} {
		if resp := do(c.method, c.path, c.key); resp.StatusCode != c.status {
			t.Errorf("%s %s with key %q: %d, want %d", c.method, c.path, c.key, resp.StatusCode, c.status)
		}
	}
	resp := do("OPTIONS", "/v1/completions", "", "Origin", "http://localhost:5173", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type")
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	stop()
	if code := <-done; code != 0 {
		t.Errorf("status %d: %s", code, stderr.String())
	}
	for _, k := range []string{"flag-key", "file-key"} {
		if strings.Contains(stderr.String(), k) {
			t.Errorf("the log shows a key: %s", stderr.String())
		}
	}
}
