package artifact_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/graph"
)

// generatedArtifacts are the checked-in artifacts of every generated model.
func generatedArtifacts(tb testing.TB) []string {
	tb.Helper()
	dirs, err := filepath.Glob("../generated/*/artifact")
	if err != nil || len(dirs) == 0 {
		tb.Fatalf("no generated artifacts (%v)", err)
	}
	return dirs
}

// Every generated artifact validates: its manifest at Load, every graph
// against it.
func TestGeneratedArtifactsValidate(t *testing.T) {
	for _, dir := range generatedArtifacts(t) {
		a, err := artifact.Load(os.DirFS(dir))
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, ref := range a.Graphs {
			if _, err := a.GraphVariant(ref.Kind, ref.Rows, ref.AllLogits); err != nil {
				t.Errorf("%s: %v", dir, err)
			}
		}
	}
}

// tinyGo is the default model's checked-in artifact, file by file.
func tinyGo(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	dir := "../generated/tiny-go/artifact"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if files[e.Name()], err = os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// editGraph rewrites graph file name of files with edit, skipping the
// decoder's validation (an editor's tools would not run it).
func editGraph(t *testing.T, files map[string][]byte, name string, edit func(g *graph.Graph)) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(files[name]))
	if err != nil {
		t.Fatal(err)
	}
	var g graph.Graph
	if err := json.NewDecoder(zr).Decode(&g); err != nil {
		t.Fatal(err)
	}
	edit(&g)
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if err := json.NewEncoder(zw).Encode(&g); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	files[name] = b.Bytes()
}

// editManifest replaces old by new in the manifest, which must hold old.
func editManifest(t *testing.T, files map[string][]byte, old, new string) {
	t.Helper()
	m := files[artifact.ManifestFile]
	if !bytes.Contains(m, []byte(old)) {
		t.Fatalf("the manifest has no %s", old)
	}
	files[artifact.ManifestFile] = bytes.Replace(m, []byte(old), []byte(new), 1)
}

// refusedT1 loads files and decodes window-T1, which must fail with an error
// holding every one of want.
func refusedT1(t *testing.T, files map[string][]byte, want ...string) {
	t.Helper()
	a, err := artifact.Load(artifact.MapFS(files))
	if err == nil {
		_, err = a.Graph(graph.KindTrunk, 1)
	}
	if err == nil {
		t.Fatalf("the edited artifact loads, want an error with %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q, want one with %q", err, w)
		}
	}
}

// An edited artifact is refused at load, with an error naming the graph,
// the dispatch and what is wrong, before a backend indexes a buffer with
// what it finds there.
func TestEditedArtifactRefused(t *testing.T) {
	const t1 = "window-T1.json.gz"
	cases := []struct {
		name  string
		edit  func(t *testing.T, files map[string][]byte)
		wants []string
	}{
		{"reversed dispatch order", func(t *testing.T, files map[string][]byte) {
			editGraph(t, files, t1, func(g *graph.Graph) {
				slices.Reverse(g.Dispatches)
				g.HostPoints, g.ICB = nil, nil
			})
		}, []string{t1, "dispatch 0 (argmax)", `scratch buffer "act"`, "no earlier dispatch writes it"}},
		{"binding off its declared range", func(t *testing.T, files map[string][]byte) {
			editGraph(t, files, t1, func(g *graph.Graph) { g.Dispatches[0].Args[1].Offset += 4096 })
		}, []string{t1, "dispatch 0 (embed_bf16)", "declares reads"}},
		{"binding past its buffer", func(t *testing.T, files map[string][]byte) {
			editGraph(t, files, t1, func(g *graph.Graph) { g.Dispatches[0].Args[2].Size = 1 << 30 })
		}, []string{"dispatch 0 (embed_bf16)", `outside buffer "act"`}},
		{"params slot bound to scratch", func(t *testing.T, files map[string][]byte) {
			editGraph(t, files, t1, func(g *graph.Graph) {
				d := &g.Dispatches[1]
				d.Args[0].Range = graph.Range{Buffer: "act", Offset: 0, Size: 20}
				d.Reads[0] = d.Args[0].Range
			})
		}, []string{t1, "dispatch 1", "params slot"}},
		{"binding at a slot its kernel lacks", func(t *testing.T, files map[string][]byte) {
			editGraph(t, files, t1, func(g *graph.Graph) { g.Dispatches[0].Args[2].Slot = 5 })
		}, []string{t1, "dispatch 0 (embed_bf16)", "slot 5"}},
		{"argument struct field outside it", func(t *testing.T, files map[string][]byte) {
			editManifest(t, files, `"rmsnorm_args","size":4,"align":4,"fields":[{"name":"eps","type":"float","offset":0}]`,
				`"rmsnorm_args","size":4,"align":4,"fields":[{"name":"eps","type":"float","offset":4}]`)
		}, []string{artifact.ManifestFile, "rmsnorm_args", `"eps"`}},
		{"argument struct of another size than the kernel's", func(t *testing.T, files map[string][]byte) {
			editManifest(t, files, `"attn_prep_args","size":8`, `"attn_prep_args","size":12`)
		}, []string{artifact.ManifestFile, "kernel attn_prep", "8-byte argument struct"}},
		{"scalar its argument struct lacks", func(t *testing.T, files map[string][]byte) {
			editGraph(t, files, t1, func(g *graph.Graph) {
				for i := range g.Dispatches {
					if g.Dispatches[i].Family == graph.FamilyRMSNorm {
						g.Dispatches[i].Scalars[0].Name = "epsilon"
						return
					}
				}
				t.Fatal("no rmsnorm dispatch")
			})
		}, []string{t1, "rmsnorm", "epsilon", "rmsnorm_args"}},
		{"pipeline the manifest lacks", func(t *testing.T, files map[string][]byte) {
			editGraph(t, files, t1, func(g *graph.Graph) { g.Dispatches[0].Consts[1].Value++ })
		}, []string{t1, "dispatch 0 (embed_bf16)", "not among the manifest's pipelines"}},
		{"hazard without a barrier", func(t *testing.T, files map[string][]byte) {
			editGraph(t, files, t1, func(g *graph.Graph) {
				for i := range g.Dispatches {
					g.Dispatches[i].Barrier = false
				}
				g.ICB = nil
			})
		}, []string{t1, "dispatch 1 (rmsnorm)", "only a dispatch of its own barrier group writes it"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := tinyGo(t)
			c.edit(t, files)
			refusedT1(t, files, c.wants...)
		})
	}
}

// BenchmarkValidate is the validation's share of a load: the default
// model's graphs read (gunzip, JSON, validation) and validated alone.
func BenchmarkValidate(b *testing.B) {
	a, err := artifact.Load(os.DirFS("../generated/tiny-go/artifact"))
	if err != nil {
		b.Fatal(err)
	}
	var graphs []*graph.Graph
	for _, ref := range a.Graphs {
		g, err := a.GraphVariant(ref.Kind, ref.Rows, ref.AllLogits)
		if err != nil {
			b.Fatal(err)
		}
		graphs = append(graphs, g)
	}
	b.Run("read", func(b *testing.B) {
		for b.Loop() {
			for _, ref := range a.Graphs {
				if _, err := a.GraphVariant(ref.Kind, ref.Rows, ref.AllLogits); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("validate", func(b *testing.B) {
		for b.Loop() {
			for i, g := range graphs {
				if err := g.Validate(); err != nil {
					b.Fatal(err)
				}
				if err := a.CheckGraph(g, a.Graphs[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// A kernel kernels.metal lacks on purpose (listed missing: no MSL decoder
// for its format) does not stop the graphs that dispatch it from loading:
// the cpu backend runs them, the GPU backends refuse the model.
func TestMissingKernelLoads(t *testing.T) {
	files := tinyGo(t)
	var m artifact.Artifact
	if err := json.Unmarshal(files[artifact.ManifestFile], &m); err != nil {
		t.Fatal(err)
	}
	const gone = "embed_bf16"
	m.Kernels = slices.DeleteFunc(m.Kernels, func(k artifact.Kernel) bool { return k.Name == gone })
	m.Pipelines = slices.DeleteFunc(m.Pipelines, func(p artifact.Pipeline) bool { return p.Kernel == gone })
	m.Missing = append(m.Missing, gone+": no MSL decoder for format bf16")
	b, err := json.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	files[artifact.ManifestFile] = b
	a, err := artifact.Load(artifact.MapFS(files))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Graph(graph.KindTrunk, 1); err != nil {
		t.Fatal(err)
	}
}
