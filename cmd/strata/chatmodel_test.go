package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// strata serve and strata run --chat run the embedded tiny-go-chat; plain
// strata run stays on tiny-go.
func TestDefaultModels(t *testing.T) {
	url, _ := startServe(t)
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var models struct{ Data []struct{ ID string } }
	if err := json.NewDecoder(resp.Body).Decode(&models); err != nil {
		t.Fatal(err)
	}
	if len(models.Data) != 1 || models.Data[0].ID != "tiny-go-chat" {
		t.Errorf("strata serve lists %+v, want tiny-go-chat", models.Data)
	}

	var errOut string
	withStdin("Hi\n", func() { _, errOut, _ = runStrata(t, "run", "--chat", "-n", "4") })
	if !strings.Contains(errOut, "chatting with tiny-go-chat") {
		t.Errorf("strata run --chat did not run tiny-go-chat:\n%s", errOut)
	}
	_, errOut, status := runStrata(t, "run", "-n", "1")
	if status != 0 || !strings.Contains(errOut, "(tiny-go,") {
		t.Errorf("strata run: status %d, want tiny-go:\n%s", status, errOut)
	}
}
