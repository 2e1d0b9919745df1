package engine_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/backend/cpu"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/weights"
)

// plainBackend is the cpu backend with none of its optional capabilities:
// not InPlace, programs neither Ordered nor HostPrograms. It is an io.Closer
// and counts its closes.
type plainBackend struct{ closed int }

type plainProgram struct{ p backend.Program }

func (p plainProgram) Run() error { return p.p.Run() }

func (b *plainBackend) NewMemory(graphs ...*graph.Graph) (backend.Memory, error) {
	return cpu.Backend.NewMemory(graphs...)
}

func (b *plainBackend) Compile(g *graph.Graph, mem backend.Memory) (backend.Program, error) {
	p, err := cpu.Backend.Compile(g, mem)
	if err != nil {
		return nil, err
	}
	return plainProgram{p}, nil
}

func (b *plainBackend) Close() error { b.closed++; return nil }

func tinyA(t *testing.T) (*models.Config, []*graph.Graph) {
	t.Helper()
	c, err := models.Load(filepath.Join("..", "..", "models", "tiny-a", "model.toml"))
	if err != nil {
		t.Fatal(err)
	}
	graphs, err := gen.Windows(c, true)
	if err != nil {
		t.Fatal(err)
	}
	return c, graphs
}

// The engine uses a backend's optional capabilities only where it has them,
// and says so: logits are the same either way.
func TestOptionalCapabilities(t *testing.T) {
	c, graphs := tinyA(t)
	full, err := engine.LoadWith(c, graphs, weights.NewRandom(7), cpu.Backend)
	if err != nil {
		t.Fatal(err)
	}
	b := &plainBackend{}
	c2, graphs2 := tinyA(t)
	plain, err := engine.LoadWith(c2, graphs2, weights.NewRandom(7), b)
	if err != nil {
		t.Fatal(err)
	}
	if why := plain.Weights().Why; why != "the backend copies every weight" {
		t.Errorf("a backend that is not backend.InPlace: Weights().Why = %q", why)
	}
	if !full.SetOrder(backend.Shuffled, 3) {
		t.Error("SetOrder on the cpu backend reports programs that are not backend.Ordered")
	}
	if plain.SetOrder(backend.Shuffled, 3) {
		t.Error("SetOrder reports programs that are not backend.Ordered as ordered")
	}
	tokens := []int{1, 2, 3, 4}
	want, err := full.NewSession().Window(tokens)
	if err != nil {
		t.Fatal(err)
	}
	got, err := plain.NewSession().Window(tokens)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("row %d logit %d: %v without the capabilities, %v with", i, j, got[i][j], want[i][j])
			}
		}
	}
	if err := plain.Close(); err != nil {
		t.Fatal(err)
	}
	if b.closed != 1 {
		t.Errorf("Model.Close closed the backend %d times, want once", b.closed)
	}
}

// Expert streaming needs programs that stop at host points; a backend
// without them is told so at the first window, not run wrong.
func TestStreamingNeedsHostPrograms(t *testing.T) {
	c, graphs := tinyA(t)
	m, err := engine.LoadStreaming(c, graphs, weights.NewRandom(7), &plainBackend{}, engine.Streaming{Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = m.NewSession().Window([]int{1, 2})
	if err == nil || !strings.Contains(err.Error(), "expert streaming needs a backend that stops at host points") {
		t.Fatalf("streaming on programs without host points: err %v", err)
	}
}
