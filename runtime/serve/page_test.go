package serve

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestChatPage: / serves the embedded page, which talks to the API's chat
// route; its script parses (node --check, when node is on PATH). Other
// unknown paths are 404 with the error object.
func TestChatPage(t *testing.T) {
	f := startFake(t, "hi", 0, nil, nil)
	resp, err := http.Get(f.ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(page, `"/v1/chat/completions"`) || !strings.Contains(page, "stream: true") {
		t.Fatalf("page: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if code, body := get(t, f.ts.URL+"/index.php"); code != 404 || !strings.Contains(body, `"error"`) {
		t.Errorf("unknown path: %d %s", code, body)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("no node on PATH to check the script")
	}
	i, j := strings.Index(page, "<script>"), strings.Index(page, "</script>")
	if i < 0 || j < i {
		t.Fatal("the page has no script")
	}
	js := filepath.Join(t.TempDir(), "page.js")
	if err := os.WriteFile(js, []byte(page[i+len("<script>"):j]), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("node", "--check", js).CombinedOutput(); err != nil {
		t.Errorf("the page's script does not parse: %v\n%s", err, out)
	}
}

// TestChatPageInBrowser: the chat page in headless chromium (puppeteer-core
// on NODE_PATH, chromium on PATH or in $CHROMIUM): two turns, each reply
// streamed into the page with its usage line; the second turn's prompt reused
// the first's tokens; with an API key, the page asks for it once. Skipped
// without them.
func TestChatPageInBrowser(t *testing.T) {
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
	for _, key := range []string{"", "sk-page-key"} {
		t.Run("key="+key, func(t *testing.T) { chatPageInBrowser(t, chromium, key) })
	}
}

// chatPageInBrowser runs the page's two turns; with a key the server wants
// it, and the page asks for it once (a prompt dialog) and keeps it.
func chatPageInBrowser(t *testing.T, chromium, key string) {
	f := startFake(t, "Hello from strata", 0, nil, func(o *Options) {
		if key != "" {
			o.APIKeys = []string{key}
		}
	})
	raw, err := exec.Command("node", "testdata/page_browser.cjs", f.ts.URL, chromium, key).Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, raw)
	}
	var got struct {
		Model   string
		Errors  []string
		Prompts int
		Turns   []struct {
			Reply, Stats string
			Users        int
		}
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if key != "" {
		// The browser logs the first, keyless request's 401.
		got.Errors = slices.DeleteFunc(got.Errors, func(e string) bool { return strings.Contains(e, "401 (Unauthorized)") })
	}
	if wantPrompts := min(len(key), 1); got.Model != "fake" || len(got.Errors) > 0 || len(got.Turns) != 2 || got.Prompts != wantPrompts {
		t.Fatalf("page: %+v; want %d key prompts", got, wantPrompts)
	}
	re := regexp.MustCompile(`^(\d+) prompt tokens \((\d+) reused\), first token after \d+ ms, 18 tokens, [\d.]+ tok/s$`)
	for i, tr := range got.Turns {
		m := re.FindStringSubmatch(tr.Stats)
		if tr.Reply != "Hello from strata" || tr.Users != i+1 || m == nil {
			t.Errorf("turn %d: %+v", i+1, tr)
			continue
		}
		if reused := m[2]; (i == 0) != (reused == "0") {
			t.Errorf("turn %d reused %s tokens: %q", i+1, reused, tr.Stats)
		}
	}
}
