package serve

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// send makes a request with headers and returns the status, headers and
// body.
func send(t *testing.T, method, url, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestAPIKey: with keys, every route but /health and the chat page needs
// one of them (Authorization: Bearer, any case of the scheme, or x-api-key);
// otherwise 401 with OpenAI's error object, code invalid_api_key, and the
// key is never in a response.
func TestAPIKey(t *testing.T) {
	const k1, k2 = "sk-first-key-0123", "second"
	f := startFake(t, "ok", 0, nil, func(o *Options) { o.APIKeys = []string{k1, k2} })
	chat := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`
	for _, c := range []struct {
		method, path, body string
		hdr                map[string]string
		status             int
	}{
		{"POST", "/v1/chat/completions", chat, nil, 401},
		{"POST", "/v1/chat/completions", chat, map[string]string{"Authorization": "Bearer " + k1}, 200},
		{"POST", "/v1/chat/completions", chat, map[string]string{"Authorization": "bearer " + k2}, 200},
		{"POST", "/v1/chat/completions", chat, map[string]string{"X-Api-Key": k2}, 200},
		{"POST", "/v1/chat/completions", chat, map[string]string{"Authorization": "Bearer " + k1 + "x"}, 401},
		{"POST", "/v1/chat/completions", chat, map[string]string{"Authorization": "Bearer " + k1[:len(k1)-1]}, 401},
		{"POST", "/v1/chat/completions", chat, map[string]string{"Authorization": "Basic " + k1}, 401},
		{"POST", "/v1/chat/completions", chat, map[string]string{"Authorization": k1}, 401},
		{"POST", "/v1/chat/completions", chat, map[string]string{"Authorization": "Bearer "}, 401},
		{"POST", "/v1/completions", `{"prompt":"x","stream":true}`, nil, 401},
		{"POST", "/v1/completions", `{"prompt":"x","stream":true}`, map[string]string{"Authorization": "Bearer " + k2}, 200},
		{"GET", "/v1/models", "", nil, 401},
		{"GET", "/v1/models", "", map[string]string{"Authorization": "Bearer " + k1}, 200},
		{"GET", "/v1/models/fake", "", nil, 401},
		{"GET", "/metrics", "", nil, 401},
		{"GET", "/nowhere", "", nil, 401},
		{"GET", "/health", "", nil, 200},
		{"GET", "/", "", nil, 200},
	} {
		code, h, b := send(t, c.method, f.ts.URL+c.path, c.body, c.hdr)
		if code != c.status {
			t.Errorf("%s %s %v: %d %s, want %d", c.method, c.path, c.hdr, code, b, c.status)
		}
		if strings.Contains(b, k1) || strings.Contains(b, k2) {
			t.Errorf("%s %s: the response shows a key: %s", c.method, c.path, b)
		}
		if code == 401 {
			r := decode[chatReply](t, []byte(b))
			if r.Error == nil || r.Error.Code == nil || *r.Error.Code != "invalid_api_key" || r.Error.Type != "invalid_request_error" || h.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s: 401 %v %s", c.method, c.path, h, b)
			}
		}
	}
	for _, bad := range []string{"", " spaced", "k\n"} {
		if _, err := newAccess([]string{bad}, nil); err == nil {
			t.Errorf("key %q was taken", bad)
		}
	}
}

// TestCORS: a browser's preflight from an allowed origin gets 204 with the
// CORS headers, without a key; the requests that follow carry
// Access-Control-Allow-Origin on every response (200, a stream, 401, 404);
// another origin's preflight is refused and its responses carry none; "*"
// allows any; without origins there are no CORS headers at all.
func TestCORS(t *testing.T) {
	const origin, key = "https://app.example.com", "k"
	f := startFake(t, "ok", 0, nil, func(o *Options) { o.APIKeys = []string{key}; o.CORSOrigins = []string{origin, "http://localhost:3000"} })
	preflight := map[string]string{"Origin": origin, "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "authorization,content-type,x-stainless-os"}
	code, h, b := send(t, "OPTIONS", f.ts.URL+"/v1/chat/completions", "", preflight)
	allowHeaders := strings.ToLower(h.Get("Access-Control-Allow-Headers"))
	if code != 204 || h.Get("Access-Control-Allow-Origin") != origin || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(allowHeaders, "authorization") || !strings.Contains(allowHeaders, "content-type") || !strings.Contains(allowHeaders, "x-stainless-os") ||
		h.Get("Access-Control-Max-Age") == "" || !strings.Contains(h.Get("Vary"), "Origin") {
		t.Errorf("preflight: %d %v %s", code, h, b)
	}
	withKey := map[string]string{"Origin": origin, "Authorization": "Bearer " + key, "Content-Type": "application/json"}
	noKey := map[string]string{"Origin": origin}
	for _, c := range []struct {
		method, path, body string
		hdr                map[string]string
		status             int
	}{
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, withKey, 200},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream":true}`, withKey, 200},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, noKey, 401},
		{"POST", "/v1/chat/completions", `{"messages":[]}`, withKey, 400},
		{"GET", "/v1/nowhere", "", withKey, 404},
		{"GET", "/health", "", noKey, 200},
	} {
		code, h, b := send(t, c.method, f.ts.URL+c.path, c.body, c.hdr)
		if code != c.status || h.Get("Access-Control-Allow-Origin") != origin || h.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("%s %s: %d, Access-Control-Allow-Origin %q; want %d with %q: %s", c.method, c.path, code, h.Get("Access-Control-Allow-Origin"), c.status, origin, b)
		}
		if strings.Contains(c.body, "stream") && !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
			t.Errorf("not a stream: %v", h)
		}
	}
	// Another origin: its preflight is refused, its requests get no CORS
	// headers (the browser withholds the response); no Origin, none either.
	other := map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
	if code, h, _ := send(t, "OPTIONS", f.ts.URL+"/v1/chat/completions", "", other); code != 403 || h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("another origin's preflight: %d %v", code, h)
	}
	for _, hdr := range []map[string]string{{"Origin": "https://evil.example", "Authorization": "Bearer " + key}, {"Authorization": "Bearer " + key}} {
		if code, h, _ := send(t, "GET", f.ts.URL+"/v1/models", "", hdr); code != 200 || h.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%v: %d %v", hdr, code, h)
		}
	}

	// "*": any origin, no Vary.
	g := startFake(t, "ok", 0, nil, func(o *Options) { o.CORSOrigins = []string{"*"} })
	if code, h, _ := send(t, "OPTIONS", g.ts.URL+"/v1/completions", "", other); code != 204 || h.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("*: preflight %d %v", code, h)
	}
	// No origins: as before, no CORS at all (a preflight is no route).
	n := startFake(t, "ok", 0, nil, nil)
	if code, h, _ := send(t, "OPTIONS", n.ts.URL+"/v1/completions", "", preflight); code == 204 || h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("no --cors-origin: preflight %d %v", code, h)
	}
	if _, h, _ := send(t, "GET", n.ts.URL+"/v1/models", "", noKey); h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("no --cors-origin: %v", h)
	}
	for _, bad := range []string{"example.com", "https://example.com/path", "ftp://example.com", "https://"} {
		if _, err := newAccess(nil, []string{bad}); err == nil {
			t.Errorf("origin %q was taken", bad)
		}
	}
}

// TestCORSInBrowser: a page on another origin calls the API from headless
// chromium with a key, as a web app does: the browser's own preflight passes,
// the reply and a stream are readable, a 401 without the key is readable
// too; a page on an origin the server does not allow cannot call it.
func TestCORSInBrowser(t *testing.T) {
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium, _ = exec.LookPath("chromium")
	}
	needNode(t, "puppeteer-core")
	if chromium == "" {
		if os.Getenv("STRATA_REQUIRE_NODE") == "1" {
			t.Fatal("no chromium on PATH or in $CHROMIUM, with STRATA_REQUIRE_NODE=1")
		}
		t.Skip("no chromium on PATH or in $CHROMIUM")
	}
	blank := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<!doctype html><title>app</title>")
	})
	app, other := httptest.NewServer(blank), httptest.NewServer(blank)
	defer app.Close()
	defer other.Close()
	const key = "sk-browser-key"
	f := startFake(t, "Hello", 0, nil, func(o *Options) { o.APIKeys = []string{key}; o.CORSOrigins = []string{app.URL} })
	raw, err := exec.Command("node", "testdata/cors_browser.cjs", app.URL, other.URL, f.ts.URL, key, chromium).Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, raw)
	}
	type calls struct {
		Plain struct {
			Status  int
			Content string
		}
		Stream struct {
			Status int
			Text   string
		}
		NoKey struct {
			Status int
			Code   string
		}
		Error string
	}
	var got struct{ Allowed, Other calls }
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	a := got.Allowed
	if a.Error != "" || a.Plain.Status != 200 || a.Plain.Content != "Hello" || a.Stream.Status != 200 ||
		!strings.Contains(a.Stream.Text, `"content":"H"`) || !strings.HasSuffix(a.Stream.Text, "data: [DONE]\n\n") ||
		a.NoKey.Status != 401 || a.NoKey.Code != "invalid_api_key" {
		t.Errorf("the allowed origin: %+v", a)
	}
	if !strings.Contains(got.Other.Error, "Failed to fetch") {
		t.Errorf("another origin: %+v, want the browser to refuse", got.Other)
	}
	// The browser sent its own preflights (204), and the disallowed one's
	// was refused (403).
	req, _ := http.NewRequest("GET", f.ts.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `{endpoint="/v1/chat/completions",code="204"}`) || !strings.Contains(string(b), `{endpoint="/v1/chat/completions",code="403"}`) {
		t.Errorf("no preflight answered in /metrics:\n%s", b)
	}
}
