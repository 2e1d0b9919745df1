package metal

import (
	"fmt"
	"slices"
	"strings"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/graph"
)

// KernelsFrom builds the backend's Kernels from a generated model
// (generated/<model>/bindings.go registers it with artifact):
// kernels.metal; dispatches resolved through the model's function-constant
// table (a block per family, the grid offsets shared), each checked against
// its kernel's buffer table (the slot of every binding, the argument
// struct's slot and size); argument structs from the generated encoders. A
// model whose graphs dispatch kernels that kernels.metal lacks is refused.
func KernelsFrom(m *artifact.Artifact) (Kernels, error) {
	if len(m.Missing) > 0 {
		return Kernels{}, fmt.Errorf("model %s: kernels.metal lacks kernels its graphs dispatch: %s", m.Name, strings.Join(m.Missing, "; "))
	}
	src, err := m.Source()
	if err != nil {
		return Kernels{}, err
	}
	families := map[graph.Family][]ConstantSlot{}
	var shared []ConstantSlot
	for _, c := range m.Constants {
		t, err := constType(c.Type)
		if err != nil {
			return Kernels{}, fmt.Errorf("model %s: function constant %s (index %d): %w", m.Name, c.Name, c.Index, err)
		}
		s := ConstantSlot{Name: c.Name, Index: c.Index, Type: t, Optional: c.Optional}
		if c.Family == "" {
			shared = append(shared, s)
		} else {
			families[c.Family] = append(families[c.Family], s)
		}
	}
	for _, k := range m.Kernels {
		if _, ok := families[k.Family]; !ok {
			families[k.Family] = nil // a family without constants of its own
		}
	}
	for f := range families {
		families[f] = append(families[f], shared...)
	}
	table := TableResolver(families)
	resolve := func(d *graph.Dispatch) (Function, error) {
		k, ok := m.Kernel(d.Kernel)
		if !ok {
			return Function{}, fmt.Errorf("kernels.metal of %s has no kernel %s", m.Name, d.Kernel)
		}
		if k.Family != d.Family {
			return Function{}, fmt.Errorf("kernel %s is of family %s in kernels.metal, %s in the graph", d.Kernel, k.Family, d.Family)
		}
		if err := checkSlots(k, d); err != nil {
			return Function{}, err
		}
		f, err := table(d)
		if err != nil {
			return Function{}, err
		}
		return readOnly(f, k.Constants), nil
	}
	args := func(d *graph.Dispatch) ([]byte, error) {
		b, err := m.EncodeArgs(d.Family, d.Scalars)
		if err != nil {
			return nil, err
		}
		want := 0
		if k, ok := m.Kernel(d.Kernel); ok && k.ArgsSlot >= 0 {
			want = k.ArgsSize
		}
		if len(b) != want {
			return nil, fmt.Errorf("kernel %s: argument struct of %d bytes, kernels.metal declares %d", d.Kernel, len(b), want)
		}
		return b, nil
	}
	return Kernels{Source: string(src), Resolve: resolve, Args: args}, nil
}

// readOnly keeps the constants the kernel's code reads (what Metal's
// reflection declares for it): a dispatch also carries constants its kernel
// ignores (the storage format its name already fixes, the sparse shape of a
// dense attention), and the load-time check against the reflection refuses a
// value at an index the function does not declare. Dropping them also lets
// dispatches that differ only there share a pipeline.
func readOnly(f Function, reads []int) Function {
	kept := f.Constants[:0:0]
	for _, c := range f.Constants {
		if slices.Contains(reads, c.Index) {
			kept = append(kept, c)
		}
	}
	f.Constants = kept
	return f
}

// DeclaredFrom is what Metal's reflection (functionConstantsDictionary)
// reports for each kernel of a generated model, from the generator's
// metadata: the constants its code reads, optional ones not required. A
// Recorder given it makes the backend's load-time check run as on a Mac.
func DeclaredFrom(m *artifact.Artifact) map[string][]DeclaredConstant {
	out := map[string][]DeclaredConstant{}
	for _, k := range m.Kernels {
		out[k.Name] = []DeclaredConstant{}
		for _, c := range m.Constants {
			if c.Family != k.Family && c.Family != "" || !slices.Contains(k.Constants, c.Index) {
				continue
			}
			typ, err := constType(c.Type)
			if err != nil {
				continue // KernelsFrom refuses the model
			}
			out[k.Name] = append(out[k.Name], DeclaredConstant{Name: string(c.Name), Index: c.Index, Type: typ, Required: !c.Optional})
		}
	}
	return out
}

func constType(t string) (DataType, error) {
	switch t {
	case artifact.UInt:
		return TypeUInt, nil
	case artifact.Bool:
		return TypeBool, nil
	}
	return 0, fmt.Errorf("unknown type %q", t)
}

// checkSlots holds a dispatch's bindings to the kernel's buffer arguments:
// the same names at the same slots, and the argument struct where the kernel
// reads it.
func checkSlots(k *artifact.Kernel, d *graph.Dispatch) error {
	slots := map[string]int{}
	for _, b := range k.Buffers {
		slots[b.Name] = b.Slot
	}
	next := 0
	for _, a := range d.Args {
		s, ok := slots[a.Name]
		if !ok {
			return fmt.Errorf("kernel %s has no buffer argument %s", k.Name, a.Name)
		}
		if s != a.Slot {
			return fmt.Errorf("kernel %s reads %s at slot %d, the graph binds it at %d", k.Name, a.Name, s, a.Slot)
		}
		next = max(next, a.Slot+1)
	}
	if len(d.Args) != len(k.Buffers) {
		return fmt.Errorf("kernel %s takes %d buffers, the graph binds %d", k.Name, len(k.Buffers), len(d.Args))
	}
	if k.ArgsSlot >= 0 && k.ArgsSlot != next {
		return fmt.Errorf("kernel %s reads its argument struct at slot %d, the backend binds it at %d", k.Name, k.ArgsSlot, next)
	}
	return nil
}
