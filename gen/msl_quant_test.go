package gen

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/backend/mslemu"
	"github.com/strata-llm/strata/templates/msl"
)

// quantPlans are quant plans that, between them, put every quantized format
// in every tensor class.
var quantPlans = []models.QuantPlan{
	{Trunk: "q8_0", Experts: "iq2_xs", Embeddings: "q8_0", Head: "q6_k"}, // the README's plan
	{Trunk: "q8_0", Experts: "iq2_xs", Embeddings: "q8_0", Head: "q6_k", Rows: "pad"},
	{Trunk: "q8_0", Experts: "iq2_xs", Embeddings: "q8_0", Head: "q6_k", Rows: "fallback"},
	{Trunk: "q4_k", Experts: "q6_k", Embeddings: "iq4_xs", Head: "iq4_nl", Rows: "pad"},
	{Trunk: "iq4_nl", Experts: "q4_k", Embeddings: "iq2_xs", Head: "q4_k", Rows: "pad"},
	{Trunk: "iq2_xs", Experts: "iq4_xs", Embeddings: "q6_k", Head: "iq4_xs", Rows: "pad"},
	{Trunk: "q6_k", Experts: "iq4_nl", Embeddings: "q4_k", Head: "iq2_xs"},
	{Trunk: "q4_0", Experts: "q2_k", Embeddings: "q5_0", Head: "q5_k", Rows: "pad"},
	{Trunk: "q5_1", Experts: "q3_k", Embeddings: "q4_1", Head: "q2_k", Rows: "pad"},
}

func planString(p models.QuantPlan) string {
	rows, _ := p.RowPolicy()
	return fmt.Sprintf("trunk=%s,experts=%s,embed=%s,head=%s,rows=%s", p.Trunk, p.Experts, p.Embeddings, p.Head, rows)
}

// quantLibrary is the library of model name (from models/) under plan.
func quantLibrary(t *testing.T, name string, plan models.QuantPlan) (*Library, error) {
	t.Helper()
	c, err := models.Load("../models/" + name + "/model.toml")
	if err != nil {
		t.Fatal(err)
	}
	c.Quant = plan
	gs, err := Windows(c, false)
	if err != nil {
		return nil, err
	}
	return BuildLibrary(c, gs)
}

// TestQuantizedLibraries: with MSL decoders for every format, the models'
// libraries under every plan hold every kernel their graphs dispatch, also
// where a row-policy fallback stores the experts' down projection in
// another format than gate and up (moe_down is named by down's format).
func TestQuantizedLibraries(t *testing.T) {
	// What stays missing (or the error a plan gets), by model and plan;
	// absent: nothing. (The hyper-connections' rows of 16 under q8_0 fall
	// back to f16, as llama-quantize's do.)
	want := map[string]map[string]string{}
	formats := map[string]bool{}
	for _, name := range append(mslModels, "tiny-k512") {
		for _, plan := range quantPlans {
			var got string
			lib, err := quantLibrary(t, name, plan)
			if err != nil {
				got = "error: " + err.Error()
			} else {
				for _, f := range lib.Formats {
					formats[f] = true
				}
				var missing []string
				for _, m := range lib.Missing {
					missing = append(missing, m.Kernel+": "+m.Reason)
				}
				got = strings.Join(missing, "; ")
				if _, err := lib.MSL(); err != nil {
					t.Errorf("%s %s: %v", name, planString(plan), err)
				}
			}
			if w := want[name][planString(plan)]; (w == "") != (got == "") || !strings.HasPrefix(got, w) {
				t.Errorf("%s %s: missing %q, want %q", name, planString(plan), got, w)
			} else if got != "" {
				t.Logf("%s %s: %s", name, planString(plan), got)
			}
		}
	}
	for _, f := range quant.Names() {
		// Formats without a quantizer cannot be planned; TestDecodersTypeCheck
		// checks their decoders.
		if qf, _ := quant.Lookup(f); !formats[f] && f != "f16" && f != "bf16" && qf.Encode != nil {
			t.Errorf("no library holds a decoder for %s", f)
		}
	}
}

// TestDecodersTypeCheck: the decoders of every format with an MSL template,
// planned or not (the decode-only formats cannot be planned), emitted
// together with their lookup tables, pass the clang type check.
func TestDecodersTypeCheck(t *testing.T) {
	requireClangHere(t)
	chunks, err := formatChunks(msl.FS)
	if err != nil {
		t.Fatal(err)
	}
	lib, err := quantLibrary(t, "tiny-a", quantPlans[7])
	if err != nil {
		t.Fatal(err)
	}
	for name := range chunks {
		if !slices.Contains(lib.Formats, name) {
			lib.Formats = append(lib.Formats, name)
		}
	}
	slices.Sort(lib.Formats)
	for _, want := range []string{"iq2_xxs", "iq3_xxs", "q2_k", "q5_k"} {
		if !slices.Contains(lib.Formats, want) {
			t.Fatalf("no MSL decoder for %s", want)
		}
	}
	src, err := lib.emit(msl.FS)
	if err != nil {
		t.Fatal(err)
	}
	// The unplanned formats' chunk constants are used by no kernel here.
	for _, name := range lib.Formats {
		src = fmt.Appendf(src, "static_assert(%s_chunk == %d, \"chunk\");\n", name, chunks[name])
	}
	if err := mslemu.TypeCheck("decoders.metal", src); err != nil {
		t.Fatal(err)
	}
}

// TestQuantizedKernelsTypeCheck: kernels.metal of libraries that hold every
// quantized format (the tiny-a oracle and Qwen3.8-Flash-Next under several
// plans) passes the clang type check.
func TestQuantizedKernelsTypeCheck(t *testing.T) {
	requireClangHere(t)
	for _, tc := range []struct {
		model string
		plan  models.QuantPlan
	}{
		{"tiny-a", quantPlans[3]}, {"tiny-a", quantPlans[4]}, {"tiny-a", quantPlans[5]},
		{"tiny-a", quantPlans[7]}, {"tiny-a", quantPlans[8]},
		{"qwen38-flash-next", quantPlans[0]},
	} {
		lib, err := quantLibrary(t, tc.model, tc.plan)
		if err != nil {
			t.Fatal(err)
		}
		src, err := lib.MSL()
		if err != nil {
			t.Fatal(err)
		}
		t.Run(tc.model+"/"+planString(tc.plan), func(t *testing.T) {
			t.Parallel()
			if err := mslemu.TypeCheck(tc.model+".metal", src); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func requireClangHere(t *testing.T) {
	t.Helper()
	if _, err := mslemu.Clang(); errors.Is(err, mslemu.ErrNoClang) {
		if os.Getenv("STRATA_REQUIRE_CLANG") != "" {
			t.Fatal("STRATA_REQUIRE_CLANG is set but " + err.Error())
		}
		t.Skip("skipping: " + err.Error())
	}
}

// withTemplate is the templates with file p replaced (data nil: removed).
func withTemplate(t *testing.T, p string, data []byte) fs.FS {
	t.Helper()
	overlay := fstest.MapFS{}
	err := fs.WalkDir(msl.FS, ".", func(q string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || q == p {
			return err
		}
		b, err := fs.ReadFile(msl.FS, q)
		overlay[q] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if data != nil {
		overlay[p] = &fstest.MapFile{Data: data}
	}
	return overlay
}

// The lookup tables are emitted once per kernels.metal however many formats
// read them, only when one does, with the values of ggml_tables.json: read
// back from the MSL and compared with ../shared/specs/ggml_tables.json
// itself (parsed here, not by models/quant) when it is there, else with
// models/quant's embedded copy.
func TestLookupTables(t *testing.T) {
	both, err := quantLibrary(t, "tiny-a", quantPlans[3]) // iq4_xs embeddings, iq4_nl head
	if err != nil {
		t.Fatal(err)
	}
	src, err := both.MSL()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(src), "kvalues_iq4nl[16] = {"); n != 1 {
		t.Errorf("kvalues_iq4nl defined %d times with iq4_nl and iq4_xs decoders", n)
	}
	if strings.Contains(string(src), "iq2xs_grid") {
		t.Error("iq2xs_grid emitted without an iq2_xs decoder")
	}
	none := testLibraries(t)["tiny-a"].lib
	plain, err := none.MSL()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(plain), "Lookup tables") {
		t.Error("lookup tables emitted for a library of float formats")
	}

	iq2, err := quantLibrary(t, "tiny-a", quantPlans[1])
	if err != nil {
		t.Fatal(err)
	}
	src2, err := iq2.MSL()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]uint64{}
	for name, text := range map[string]string{"iq2xs_grid": string(src2), "ksigns_iq2xs": string(src2), "kvalues_iq4nl": string(src)} {
		m := regexp.MustCompile(`(?s)constexpr constant \w+ ` + name + `\[(\d+)\] = \{(.*?)\};`).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("no table %s in kernels.metal", name)
		}
		for _, v := range strings.FieldsFunc(m[2], func(r rune) bool { return r == ',' || r == ' ' || r == '\n' }) {
			v = strings.TrimSuffix(strings.TrimSuffix(v, "ul"), ".0f")
			x, err := strconv.ParseInt(v, 0, 64)
			if err != nil {
				u, uerr := strconv.ParseUint(v, 0, 64)
				if uerr != nil {
					t.Fatalf("table %s: value %q: %v", name, v, err)
				}
				x = int64(u)
			}
			got[name] = append(got[name], uint64(x))
		}
		if n, _ := strconv.Atoi(m[1]); n != len(got[name]) {
			t.Errorf("table %s declares %d entries and holds %d", name, n, len(got[name]))
		}
	}
	want := map[string][]uint64{}
	if raw, err := os.ReadFile("../../shared/specs/ggml_tables.json"); err == nil {
		var doc struct {
			Tables map[string]struct {
				Values []json.RawMessage `json:"values"`
			} `json:"tables"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		for name := range got {
			for _, rv := range doc.Tables[name].Values {
				var s string
				if json.Unmarshal(rv, &s) == nil {
					u, err := strconv.ParseUint(s, 0, 64)
					if err != nil {
						t.Fatal(err)
					}
					want[name] = append(want[name], u)
					continue
				}
				var x int64
				if err := json.Unmarshal(rv, &x); err != nil {
					t.Fatal(err)
				}
				want[name] = append(want[name], uint64(x))
			}
		}
	} else {
		t.Logf("../shared/specs/ggml_tables.json not found (%v): comparing with models/quant's copy", err)
		for _, v := range quant.IQ2XSGrid() {
			want["iq2xs_grid"] = append(want["iq2xs_grid"], v)
		}
		for _, v := range quant.IQ2XSSigns() {
			want["ksigns_iq2xs"] = append(want["ksigns_iq2xs"], uint64(v))
		}
		for _, v := range quant.IQ4NLValues() {
			want["kvalues_iq4nl"] = append(want["kvalues_iq4nl"], uint64(int64(v)))
		}
	}
	for name := range got {
		if fmt.Sprint(got[name]) != fmt.Sprint(want[name]) {
			t.Errorf("table %s in kernels.metal differs from ggml_tables.json", name)
		}
	}
}

// A format template naming a table the generator lacks is refused, and a
// decoder that reads a table its <name>.tables does not name fails the type
// check (the table is not emitted for it).
func TestFormatTablesChecked(t *testing.T) {
	p := "formats/iq4_nl.metal.tmpl"
	orig, err := fs.ReadFile(msl.FS, p)
	if err != nil {
		t.Fatal(err)
	}
	const decl = `{{define "iq4_nl.tables"}}kvalues_iq4nl{{end}}`
	if !strings.Contains(string(orig), decl) {
		t.Fatalf("%s has no %s: the test is stale", p, decl)
	}
	unknown := withTemplate(t, p, []byte(strings.Replace(string(orig), decl, `{{define "iq4_nl.tables"}}kvalues_iq4nl strata_no_table{{end}}`, 1)))
	if _, err := formatChunks(unknown); err == nil || !strings.Contains(err.Error(), "strata_no_table") {
		t.Errorf("a format naming an unknown table: %v", err)
	}

	requireClangHere(t)
	c, err := models.Load("../models/tiny-a/model.toml")
	if err != nil {
		t.Fatal(err)
	}
	c.Quant = models.QuantPlan{Trunk: "iq4_nl", Experts: "f32", Embeddings: "f32", Head: "f32"}
	gs, err := Windows(c, false)
	if err != nil {
		t.Fatal(err)
	}
	undeclared := withTemplate(t, p, []byte(strings.Replace(string(orig), decl, "", 1)))
	lib, err := buildLibraryWith(c, gs, undeclared)
	if err != nil {
		t.Fatal(err)
	}
	src, err := lib.emit(undeclared)
	if err != nil {
		t.Fatal(err)
	}
	err = mslemu.TypeCheck("undeclared.metal", src)
	if err == nil || !strings.Contains(err.Error(), "undeclared identifier 'kvalues_iq4nl'") {
		t.Errorf("a decoder reading a table it does not declare: %v", err)
	}
}

// Every quantized format's decoder is type-checked: one with an undeclared
// identifier or a write through its const row pointer fails clang.
func TestBrokenDecodersFailTypeCheck(t *testing.T) {
	requireClangHere(t)
	for _, f := range quant.Names() {
		if qf, _ := quant.Lookup(f); qf.BlockElems == 1 || qf.Encode == nil {
			continue // decode-only formats cannot be planned
		}
		c, err := models.Load("../models/tiny-a/model.toml")
		if err != nil {
			t.Fatal(err)
		}
		c.Quant = models.QuantPlan{Trunk: f, Experts: "f32", Embeddings: "f32", Head: "f32", Rows: "pad"}
		gs, err := Windows(c, false)
		if err != nil {
			t.Fatal(err)
		}
		p := "formats/" + f + ".metal.tmpl"
		orig, err := fs.ReadFile(msl.FS, p)
		if err != nil {
			t.Fatal(err)
		}
		open := "thread float4 *w) {\n"
		if strings.Count(string(orig), open) != 1 {
			t.Fatalf("%s: the decoder's signature is not found once: the test is stale", p)
		}
		for fault, want := range map[string]string{
			"strata_undeclared += 1.0f;": "undeclared identifier 'strata_undeclared'",
			"row[0] = 0;":                "read-only variable is not assignable",
		} {
			broken := withTemplate(t, p, []byte(strings.Replace(string(orig), open, open+"    "+fault+"\n", 1)))
			lib, err := buildLibraryWith(c, gs, broken)
			if err != nil {
				t.Fatal(err)
			}
			if len(lib.Missing) > 0 {
				t.Fatalf("%s: kernels missing: %v", f, lib.Missing)
			}
			src, err := lib.emit(broken)
			if err != nil {
				t.Fatal(err)
			}
			t.Run(f+"/"+want, func(t *testing.T) {
				t.Parallel()
				err := mslemu.TypeCheck(f+".metal", src)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("the broken %s decoder: want %q, got %v", f, want, err)
				}
			})
		}
	}
}
