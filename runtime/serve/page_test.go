package serve

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
