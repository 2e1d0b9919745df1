package main

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// strata graph audit --json prints the audit stratagen checked in for the
// same shape, with the documented fields.
func TestGraphAuditJSON(t *testing.T) {
	out, errText, status := runStrata(t, "graph", "audit", "--model", "../../generated/tiny-a", "--rows", "4", "--json")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errText)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	for _, f := range []string{"model", "rows", "dispatches", "barriers", "barriers_naive", "barrier_lower_bound", "host_points", "bytes_read", "bytes_written", "layers"} {
		if _, ok := got[f]; !ok {
			t.Errorf("no field %q", f)
		}
	}
	if got["model"] != "tiny-a" || got["rows"] != 4.0 {
		t.Errorf("model %v rows %v", got["model"], got["rows"])
	}
	if b, bound := got["barriers"].(float64), got["barrier_lower_bound"].(float64); b < bound || bound < 1 {
		t.Errorf("barriers %v, lower bound %v", b, bound)
	}
	data, err := os.ReadFile("../../generated/tiny-a/audit.json")
	if err != nil {
		t.Fatal(err)
	}
	var checkedIn []map[string]any
	if err := json.Unmarshal(data, &checkedIn); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range checkedIn {
		if a["rows"] == 4.0 && a["kind"] == got["kind"] {
			found = true
			if !reflect.DeepEqual(a, got) {
				t.Error("the CLI's audit differs from generated/tiny-a/audit.json")
			}
		}
	}
	if !found {
		t.Error("generated/tiny-a/audit.json has no T=4 audit")
	}
}

func TestGraphAuditText(t *testing.T) {
	for _, model := range []string{"../../generated/tiny-a/artifact", "../../generated/tiny-a"} {
		out, errText, status := runStrata(t, "graph", "audit", "--model", model, "--rows", "1")
		if status != 0 {
			t.Fatalf("%s: status %d: %s", model, status, errText)
		}
		for _, want := range []string{"tiny-a trunk, T=1:", "barriers:", "naive", "lower bound", "total"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output lacks %q:\n%s", model, want, out)
			}
		}
	}
}

func TestGraphAuditUsage(t *testing.T) {
	cases := []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"graph"}, 2, "expected a subcommand"},
		{[]string{"graph", "draw"}, 2, `unknown subcommand "draw"`},
		{[]string{"graph", "audit", "--rows", "1"}, 2, "--model is required"},
		{[]string{"graph", "audit", "--model", "tiny-go"}, 2, "--rows must be ≥ 1"},
		{[]string{"graph", "audit", "--model", "no-such", "--rows", "1"}, 2, `no model "no-such" is compiled in`},
		{[]string{"graph", "audit", "--model", "tiny-go", "--rows", "1", "extra"}, 2, "unexpected argument"},
		{[]string{"graph", "audit", "--model", "../../generated/tiny-a", "--rows", "1", "--mtp"}, 1, "no MTP head"},
		{[]string{"graph", "audit", "--model", "tiny-go", "--rows", "5"}, 1, "no trunk graph of 5 rows"},
		{[]string{"graph", "audit", "--model", "/no/such/artifact", "--rows", "1"}, 1, "/no/such/artifact"},
		{[]string{"graph", "audit", "--help"}, 0, "--model NAME --rows T"},
	}
	for _, c := range cases {
		out, errText, status := runStrata(t, c.args...)
		if c.status == 0 {
			errText = out // help goes to stdout, as strata --help's
		}
		if status != c.status || !strings.Contains(errText, c.want) {
			t.Errorf("%v: status %d, stderr %q; want %d and %q", c.args, status, errText, c.status, c.want)
		}
	}
}
