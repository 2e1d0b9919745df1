package gen

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/backend/mslemu"
	"github.com/strata-llm/strata/templates/msl"
)

// mslModels are the models whose libraries the tests build: together they
// dispatch every kernel family.
var mslModels = []string{"tiny-a", "q4-a", "qwen3-next-80b-a3b", "qwen38-flash-next"}

type builtLibrary struct {
	c      *models.Config
	graphs []*graph.Graph
	lib    *Library
}

var libraries = sync.OnceValues(func() (map[string]builtLibrary, error) {
	out := map[string]builtLibrary{}
	for _, name := range mslModels {
		c, err := models.Load("../models/" + name + "/model.toml")
		if err != nil {
			return nil, err
		}
		gs, err := Windows(c, false)
		if err != nil {
			return nil, err
		}
		lib, err := BuildLibrary(c, gs)
		if err != nil {
			return nil, err
		}
		out[name] = builtLibrary{c, gs, lib}
	}
	return out, nil
})

func testLibraries(t *testing.T) map[string]builtLibrary {
	t.Helper()
	libs, err := libraries()
	if err != nil {
		t.Fatal(err)
	}
	return libs
}

func TestCatalog(t *testing.T) {
	blocks := map[int]graph.Family{GridOffsetBlock: "grid offsets"}
	names := map[graph.Family]bool{}
	for _, f := range Families() {
		if names[f.Name] {
			t.Errorf("family %s listed twice", f.Name)
		}
		names[f.Name] = true
		if other, dup := blocks[f.Block]; dup {
			t.Errorf("families %s and %s share function-constant block %d", f.Name, other, f.Block)
		}
		blocks[f.Block] = f.Name
		if f.Block%blockSize != 0 || len(f.Consts) >= blockSize || f.Block == 0 {
			t.Errorf("family %s: block %d with %d constants", f.Name, f.Block, len(f.Consts))
		}
		seen := map[graph.ConstName]bool{}
		for _, c := range append(append([]FamilyConst{}, f.Consts...), GridOffsetConsts...) {
			if seen[c.Name] || !artifact.IsIdent(string(c.Name)) || (c.Type != ConstUInt && c.Type != ConstBool) {
				t.Errorf("family %s: constant %+v repeated, not an identifier or of no type", f.Name, c)
			}
			seen[c.Name] = true
		}
		if f.Args != nil {
			if _, err := f.Args.Layout(); err != nil {
				t.Error(err)
			}
		}
	}
	// Every family has a template, and every template is a family's, the
	// prelude or a storage format's.
	for _, f := range Families() {
		if _, err := fs.Stat(msl.FS, string(f.Name)+".metal.tmpl"); err != nil {
			t.Errorf("family %s has no template: %v", f.Name, err)
		}
	}
	tmpls, _ := fs.Glob(msl.FS, "*.metal.tmpl")
	for _, p := range tmpls {
		if name := strings.TrimSuffix(p, ".metal.tmpl"); !names[graph.Family(name)] && name != "prelude" {
			t.Errorf("template %s belongs to no kernel family", p)
		}
	}
	if _, err := formatChunks(msl.FS); err != nil {
		t.Error(err)
	}
	// rowGroup's cap is the row kernels' simdgroup bound.
	if rowGroup(1 << 20)[0] != simdWidth*rowSimdgroups {
		t.Errorf("rowGroup caps at %d threads, the MSL row kernels assume %d", rowGroup(1 << 20)[0], simdWidth*rowSimdgroups)
	}
}

// Every family of the catalog is dispatched by some model's graphs, and each
// library's kernels.metal passes its own metadata check.
func TestLibraries(t *testing.T) {
	libs := testLibraries(t)
	covered := map[graph.Family]bool{}
	for name, b := range libs {
		if len(b.lib.Missing) > 0 {
			t.Errorf("%s: kernels not emitted: %v", name, b.lib.Missing)
		}
		src, err := b.lib.MSL()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, f := range b.lib.Families {
			covered[f.Name] = true
		}
		// Every dispatch's pipeline is in the library.
		keys := map[string]bool{}
		for _, p := range b.lib.Pipelines {
			keys[p.Key()] = true
		}
		for _, g := range b.graphs {
			for i := range g.Dispatches {
				d := &g.Dispatches[i]
				p, err := b.lib.PipelineOf(d)
				if err != nil || !keys[p.Key()] {
					t.Errorf("%s: dispatch %d (%s) has no pipeline: %v", name, i, d.Kernel, err)
				}
				if !strings.Contains(string(src), "kernel void "+d.Kernel+"(") {
					t.Errorf("%s: kernel %s missing from kernels.metal", name, d.Kernel)
				}
			}
		}
	}
	for _, f := range Families() {
		if !covered[f.Name] {
			t.Errorf("no model in %v dispatches family %s, so nothing tests its template", mslModels, f.Name)
		}
	}
	// Each kernel reads every function constant of its family except those
	// listed here (the format code its name fixes; shapes its variant does
	// not need), so a template that stops reading one shows up.
	unread := map[graph.Family][]graph.ConstName{
		"embed": {"wfmt"}, "matmul": {"wfmt"}, "router": {"moce", "protect", "max_rank"}, "moe_gate_up": {"wfmt", "stride", "down_off"}, "moe_down": {"wfmt", "stride", "gate_off", "up_off"},
		"attention": {"rot_dim", "sparse", "ratio", "top_k"}, "index_prep": {"ratio", "top_k"},
		"index_pool": {"heads", "top_k"}, "index_select": {"rot_dim", "ctx"},
	}
	for name, b := range libs {
		for _, k := range b.lib.Kernels {
			for i := range GridOffsetConsts {
				if !slices.Contains(k.Consts, GridOffsetBlock+i) {
					t.Errorf("%s: kernel %s does not read the grid offsets", name, k.Name)
				}
			}
			for i, c := range k.Family.Consts {
				if !slices.Contains(k.Consts, k.Family.Block+i) && !slices.Contains(unread[k.Family.Name], c.Name) {
					t.Errorf("%s: kernel %s does not read function constant %s", name, k.Name, c.Name)
				}
			}
		}
	}
}

// CheckSource catches emitted MSL that disagrees with the metadata: a slot
// bound twice, a binding moved, a function-constant index taken twice or
// moved, a kernel lost.
func TestCheckSourceCatchesDrift(t *testing.T) {
	b := testLibraries(t)["tiny-a"]
	src, err := b.lib.MSL()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(string) string{
		"slot bound twice": func(s string) string {
			return strings.Replace(s, "device const uchar *w [[buffer(1)]]", "device const uchar *w [[buffer(0)]]", 1)
		},
		"binding moved": func(s string) string {
			return strings.Replace(s, "device float *y [[buffer(3)]]", "device float *y [[buffer(4)]]", 1)
		},
		"index taken twice": func(s string) string {
			return strings.Replace(s, "[[function_constant(301)]]", "[[function_constant(300)]]", 1)
		},
		"index moved": func(s string) string {
			return strings.Replace(s, "[[function_constant(301)]]", "[[function_constant(399)]]", 1)
		},
		"kernel lost": func(s string) string {
			return strings.Replace(s, "kernel void swiglu(", "kernel void swiglu_renamed(", 1)
		},
		"past 31 slots": func(s string) string {
			return strings.Replace(s, "device float *y [[buffer(3)]]", "device float *y [[buffer(31)]]", 1)
		},
	}
	for name, edit := range cases {
		bad := edit(string(src))
		if bad == string(src) {
			t.Fatalf("%s: the edit did not apply; the test is stale", name)
		}
		if err := b.lib.CheckSource([]byte(bad)); err == nil {
			t.Errorf("%s: CheckSource accepted it", name)
		}
	}
}

// BuildLibrary refuses dispatches that do not match the catalog.
func TestBuildLibraryRejects(t *testing.T) {
	b := testLibraries(t)["tiny-a"]
	base := b.graphs[0]
	find := func(g *graph.Graph, family graph.Family) *graph.Dispatch {
		for i := range g.Dispatches {
			if g.Dispatches[i].Family == family {
				return &g.Dispatches[i]
			}
		}
		t.Fatalf("no %s dispatch", family)
		return nil
	}
	cases := map[string]func(g *graph.Graph){
		"unknown family": func(g *graph.Graph) { find(g, "swiglu").Family = "swiglu2" },
		"undeclared constant": func(g *graph.Graph) {
			d := find(g, "swiglu")
			d.Consts = append(d.Consts, graph.Const{Name: "extra", Value: 1})
		},
		"missing constant":       func(g *graph.Graph) { d := find(g, "swiglu"); d.Consts = d.Consts[:1] },
		"bool out of range":      func(g *graph.Graph) { setConst(find(g, "rmsnorm"), "zero_centred", 2) },
		"uint past 32 bits":      func(g *graph.Graph) { setConst(find(g, "swiglu"), "dim", 1<<33) },
		"kernel name":            func(g *graph.Graph) { find(g, "matmul").Kernel = "matmul_f16" },
		"scalars":                func(g *graph.Graph) { find(g, "rmsnorm").Scalars[0].Name = "epsilon" },
		"scalars without struct": func(g *graph.Graph) { find(g, "swiglu").Scalars = []graph.Scalar{{Name: "eps"}} },
		"params not first": func(g *graph.Graph) {
			d := find(g, "swiglu")
			d.Args[0].Name, d.Args[1].Name = d.Args[1].Name, d.Args[0].Name
		},
		"reserved name": func(g *graph.Graph) { find(g, "swiglu").Args[1].Name = "lane" },
		"two layouts": func(g *graph.Graph) {
			// The first swiglu binds differently from every other.
			find(g, "swiglu").Args[3].Name = "out"
		},
	}
	for name, edit := range cases {
		g := cloneGraph(t, base)
		edit(g)
		if _, err := BuildLibrary(b.c, []*graph.Graph{g, b.graphs[1]}); err == nil {
			t.Errorf("%s: BuildLibrary accepted it", name)
		}
	}
}

func setConst(d *graph.Dispatch, name graph.ConstName, v int64) {
	for i := range d.Consts {
		if d.Consts[i].Name == name {
			d.Consts[i].Value = v
		}
	}
}

func cloneGraph(t *testing.T, g *graph.Graph) *graph.Graph {
	t.Helper()
	j, err := g.JSON()
	if err != nil {
		t.Fatal(err)
	}
	c, err := graph.Decode(j)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A storage format without an MSL decoder does not stop generation: its
// kernels are listed as missing, in kernels.metal and in the metadata.
func TestMissingDecoder(t *testing.T) {
	b := testLibraries(t)["tiny-a"]
	overlay := fstest.MapFS{}
	fs.WalkDir(msl.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && p != "formats/f32.metal.tmpl" {
			data, _ := fs.ReadFile(msl.FS, p)
			overlay[p] = &fstest.MapFile{Data: data}
		}
		return nil
	})
	lib, err := buildLibraryWith(b.c, b.graphs, overlay)
	if err != nil {
		t.Fatal(err)
	}
	if len(lib.Missing) == 0 {
		t.Fatal("no kernels reported missing without the f32 decoder")
	}
	for _, m := range lib.Missing {
		if !strings.Contains(m.Reason, "no MSL decoder for format f32") {
			t.Errorf("%s: %s", m.Kernel, m.Reason)
		}
		if _, ok := lib.Kernel(m.Kernel); ok {
			t.Errorf("missing kernel %s is still in the library", m.Kernel)
		}
	}
	src, err := lib.MSL()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "// NOT EMITTED: matmul_f32: no MSL decoder for format f32") {
		t.Error("kernels.metal does not say which kernels it lacks")
	}
}

// A deliberately broken template fails the clang type check, for every
// kernel family: a device pointer initialised from the constant params
// pointer (wrong address space), and an undeclared identifier. So the check
// that passes the real templates can fail.
func TestBrokenTemplatesFailTypeCheck(t *testing.T) {
	if _, err := mslemu.Clang(); errors.Is(err, mslemu.ErrNoClang) {
		if os.Getenv("STRATA_REQUIRE_CLANG") != "" {
			t.Fatal("STRATA_REQUIRE_CLANG is set but " + err.Error())
		}
		t.Skip("skipping: " + err.Error())
	}
	libs := testLibraries(t)
	faults := []struct {
		name, stmt string
		want       []string
	}{
		{"address_space", "device const uint *strata_broken = params; (void)strata_broken;", []string{"strata_broken", "__global", "__constant"}},
		{"undeclared", "strata_undeclared += 1.0f;", []string{"undeclared identifier 'strata_undeclared'"}},
	}
	for _, f := range Families() {
		var lib *Library
		for _, name := range mslModels {
			if l := libs[name].lib.only(f.Name); len(l.Kernels) > 0 {
				lib = l
				break
			}
		}
		if lib == nil {
			t.Errorf("no model dispatches %s", f.Name)
			continue
		}
		clean, err := lib.MSL()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		t.Run(string(f.Name)+"/clean", func(t *testing.T) {
			t.Parallel()
			if err := mslemu.TypeCheck(string(f.Name)+".metal", clean); err != nil {
				t.Fatal(err)
			}
		})
		for _, fault := range faults {
			src, err := lib.emit(breakTemplate(t, string(f.Name), fault.stmt))
			if err != nil {
				t.Fatalf("%s/%s: %v", f.Name, fault.name, err)
			}
			t.Run(string(f.Name)+"/"+fault.name, func(t *testing.T) {
				t.Parallel()
				err := mslemu.TypeCheck(string(f.Name)+".metal", src)
				if err == nil {
					t.Fatal("the broken template passed the type check")
				}
				for _, w := range fault.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("diagnostic lacks %q:\n%v", w, err)
					}
				}
			})
		}
	}
}

// breakTemplate returns the templates with stmt inserted at the top of the
// family's kernel body.
func breakTemplate(t *testing.T, family, stmt string) fs.FS {
	t.Helper()
	overlay := fstest.MapFS{}
	err := fs.WalkDir(msl.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(msl.FS, p)
		if err != nil {
			return err
		}
		if p == family+".metal.tmpl" {
			def := fmt.Sprintf("{{define %q}}", family)
			if !strings.Contains(string(data), def) {
				return fmt.Errorf("%s has no %s", p, def)
			}
			data = []byte(strings.Replace(string(data), def, def+"\n    "+stmt, 1))
		}
		overlay[p] = &fstest.MapFile{Data: data}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return overlay
}

// The generated MSL is deterministic and lists every kernel and pipeline.
func TestMSLDeterministic(t *testing.T) {
	b := testLibraries(t)["q4-a"]
	first, err := b.lib.MSL()
	if err != nil {
		t.Fatal(err)
	}
	again, err := BuildLibrary(b.c, b.graphs)
	if err != nil {
		t.Fatal(err)
	}
	second, err := again.MSL()
	if err != nil {
		t.Fatal(err)
	}
	if string(first) != string(second) {
		t.Error("two generations differ")
	}
	if n := len(regexp.MustCompile(`(?m)^kernel void `).FindAll(first, -1)); n != len(b.lib.Kernels) {
		t.Errorf("%d kernels emitted, %d in the library", n, len(b.lib.Kernels))
	}
}

func TestPackageName(t *testing.T) {
	for model, want := range map[string]string{
		"tiny-a": "tinya", "qwen3-next-80b-a3b": "qwen3next80ba3b", "qwen38-flash-next": "qwen38flashnext",
		"q4-a": "q4a", "3b.x": "model3bx", "Go": "modelgo", "-": "model",
	} {
		if got := PackageName(model); got != want {
			t.Errorf("PackageName(%q) = %q, want %q", model, got, want)
		}
	}
}

// A template that reads the params header at a literal index is refused: the
// indices come from graph.Param*Word through the prelude's params_* names.
func TestTemplateParamsIndexNamed(t *testing.T) {
	b := testLibraries(t)["tiny-a"]
	for _, c := range []struct {
		stmt string
		ok   bool
	}{
		{"const uint named = params[params_pos];", true},
		{"const uint literal = params[1];", false},
		{"const uint literal = params[ 4 + tid];", false},
	} {
		_, err := b.lib.emit(breakTemplate(t, string(graph.FamilyEmbed), c.stmt))
		if c.ok && err != nil {
			t.Errorf("%s: %v", c.stmt, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "literal index")) {
			t.Errorf("%s: emitted, or not for the literal index: %v", c.stmt, err)
		}
	}
}
