package artifact

import (
	"fmt"
	"slices"
	"strings"

	"github.com/strata-llm/strata/graph"
)

// The one validation of an artifact: Load checks the manifest (Check) and
// GraphVariant every graph it decodes against it (CheckGraph), so no backend
// runs a graph whose bindings, argument structs or pipelines disagree with
// the kernels, and the backends keep only the checks that are their own.

// IsIdent reports whether s is a C identifier: what a kernel, type, field or
// constant name must be before a backend writes it into source it compiles.
func IsIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r != '_' && !(r >= 'a' && r <= 'z') && !(r >= 'A' && r <= 'Z') && !(i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// ElemSize is the size in bytes of the MSL element types a kernel buffer
// may have, 0 for any other.
func ElemSize(typ string) int {
	switch typ {
	case "uchar", "char":
		return 1
	case "ushort", "short", "half", "bfloat":
		return 2
	case "uint", "int", "float":
		return 4
	}
	return 0
}

// Address spaces of a kernel buffer.
const (
	SpaceDevice   = "device"
	SpaceConstant = "constant"
)

// Check validates the kernel's signature: buffer slots 0, 1, … in order, each
// in the device or constant address space with an element type ElemSize
// knows, only device buffers written, and its argument struct, if any, at the
// slot after the last buffer.
func (k *Kernel) Check() error {
	if !IsIdent(k.Name) {
		return fmt.Errorf("kernel name %q is not an identifier", k.Name)
	}
	for slot, b := range k.Buffers {
		switch {
		case b.Slot != slot:
			return fmt.Errorf("kernel %s binds %s at slot %d, expected %d", k.Name, b.Name, b.Slot, slot)
		case b.Space != SpaceDevice && b.Space != SpaceConstant:
			return fmt.Errorf("kernel %s binds %s in address space %q, expected %q or %q", k.Name, b.Name, b.Space, SpaceDevice, SpaceConstant)
		case b.Space == SpaceConstant && b.Write:
			return fmt.Errorf("kernel %s writes %s in the constant address space", k.Name, b.Name)
		case !IsIdent(b.Type) || ElemSize(b.Type) == 0:
			return fmt.Errorf("kernel %s binds %s of type %q, expected an MSL scalar type", k.Name, b.Name, b.Type)
		}
	}
	if k.ArgsSlot >= 0 && (k.ArgsSlot != len(k.Buffers) || k.ArgsSize <= 0) {
		return fmt.Errorf("kernel %s has its argument struct (%d bytes) at slot %d after %d buffers", k.Name, k.ArgsSize, k.ArgsSlot, len(k.Buffers))
	}
	if k.ArgsSlot < -1 {
		return fmt.Errorf("kernel %s has its argument struct at slot %d", k.Name, k.ArgsSlot)
	}
	return nil
}

// Check validates the function constant: MSL identifiers for its names and
// a type the backends set.
func (c *FunctionConstant) Check() error {
	ident, derived := c.Family.ConstIdents(c.Name)
	if !IsIdent(ident) || !IsIdent(derived) {
		return fmt.Errorf("function constant %q of family %q is not an identifier", c.Name, c.Family)
	}
	if c.Type != UInt && c.Type != Bool {
		return fmt.Errorf("function constant %s has type %q, expected %q or %q", c.Name, c.Type, UInt, Bool)
	}
	if c.Index < 0 {
		return fmt.Errorf("function constant %s has index %d", c.Name, c.Index)
	}
	return nil
}

// Fits reports whether v is a value of the constant's type.
func (c *FunctionConstant) Fits(v int64) bool {
	if c.Type == Bool {
		return v == 0 || v == 1
	}
	return v >= 0 && v <= 1<<32-1
}

// Check validates the manifest: unique buffer names, function constants,
// kernels and argument structs that the backends can write into source,
// kernels that read only declared constants and take the argument struct
// of their family, pipelines of declared kernels whose values fit their
// constants, and graph files named for their kind and shape. Load runs it;
// a backend given an artifact that Load did not make runs it too.
func (a *Artifact) Check() error {
	if err := a.check(); err != nil {
		return fmt.Errorf("artifact of %s: %s: %w", a.Name, ManifestFile, err)
	}
	return nil
}

func keysOf(pipelines []Pipeline) map[string]bool {
	keys := make(map[string]bool, len(pipelines))
	for _, p := range pipelines {
		keys[p.Key()] = true
	}
	return keys
}

func (a *Artifact) check() error {
	seen := map[string]bool{}
	for _, b := range a.Buffers {
		if b == "" || seen[b] {
			return fmt.Errorf("buffer %q is empty or repeated", b)
		}
		seen[b] = true
	}
	consts := map[int]*FunctionConstant{}
	for i := range a.Constants {
		c := &a.Constants[i]
		if err := c.Check(); err != nil {
			return err
		}
		if consts[c.Index] != nil {
			return fmt.Errorf("function constants %s and %s share index %d", consts[c.Index].Name, c.Name, c.Index)
		}
		consts[c.Index] = c
	}
	structs := map[graph.Family]*ArgStruct{}
	for i := range a.Args {
		s := &a.Args[i]
		if err := s.check(); err != nil {
			return err
		}
		if structs[s.Family] != nil {
			return fmt.Errorf("family %s has two argument structs", s.Family)
		}
		structs[s.Family] = s
	}
	kernels := map[string]*Kernel{}
	for i := range a.Kernels {
		k := &a.Kernels[i]
		if err := k.Check(); err != nil {
			return err
		}
		if kernels[k.Name] != nil {
			return fmt.Errorf("kernel %s is listed twice", k.Name)
		}
		kernels[k.Name] = k
		for _, idx := range k.Constants {
			if consts[idx] == nil {
				return fmt.Errorf("kernel %s reads function constant %d, which kernels.metal does not declare", k.Name, idx)
			}
		}
		if s := structs[k.Family]; k.ArgsSlot >= 0 && (s == nil || s.Size != k.ArgsSize) {
			return fmt.Errorf("kernel %s takes a %d-byte argument struct, its family %s's is %v", k.Name, k.ArgsSize, k.Family, structSize(s))
		}
	}
	for _, p := range a.Pipelines {
		if kernels[p.Kernel] == nil {
			return fmt.Errorf("pipeline %s of a kernel it does not list", p.Key())
		}
		for i, v := range p.Values {
			c := consts[v.Index]
			switch {
			case c == nil:
				return fmt.Errorf("pipeline %s sets function constant %d, which kernels.metal does not declare", p.Key(), v.Index)
			case i > 0 && v.Index <= p.Values[i-1].Index:
				return fmt.Errorf("pipeline %s: its values are not in ascending index order", p.Key())
			case !c.Fits(v.Value):
				return fmt.Errorf("pipeline %s sets %s to %d, not a %s", p.Key(), c.Name, v.Value, c.Type)
			}
		}
	}
	for _, ref := range a.Graphs {
		if (ref.Kind != graph.KindTrunk && ref.Kind != graph.KindMTP) || ref.Rows < 1 || ref.File != GraphFile(ref.Kind, ref.Rows, ref.AllLogits) {
			return fmt.Errorf("graph %q (kind %q, %d rows, all logits %v): expected a trunk or mtp graph of at least one row in %s", ref.File, ref.Kind, ref.Rows, ref.AllLogits, GraphFile(ref.Kind, max(ref.Rows, 1), ref.AllLogits))
		}
	}
	return nil
}

func structSize(s *ArgStruct) string {
	if s == nil {
		return "none"
	}
	return fmt.Sprintf("%d bytes", s.Size)
}

// check validates the layout: an identifier for the struct and each field,
// float fields aligned, inside the struct and not overlapping, the size a
// multiple of the alignment.
func (s *ArgStruct) check() error {
	if !IsIdent(s.Name) || s.Align < 1 || s.Align&(s.Align-1) != 0 || s.Size < 0 || s.Size%s.Align != 0 {
		return fmt.Errorf("argument struct %q of %s: size %d, alignment %d", s.Name, s.Family, s.Size, s.Align)
	}
	end := 0
	for _, f := range s.Fields {
		if !IsIdent(f.Name) || f.Type != ArgFloat || f.Offset < end || f.Offset%4 != 0 || f.Offset+4 > s.Size {
			return fmt.Errorf("argument struct %s: field %q (%s at offset %d) is not a float inside the struct's %d bytes after the previous field", s.Name, f.Name, f.Type, f.Offset, s.Size)
		}
		end = f.Offset + 4
	}
	return nil
}

// CheckGraph validates a decoded graph (already Validate'd on its own by
// graph.Decode) against the manifest and ref, the entry it was read from:
// its kind and shape, its buffers among the manifest's, the params header
// where this runtime writes it, and every dispatch (CheckDispatch, and a
// pipeline the manifest lists) but those of the kernels it lists Missing.
func (a *Artifact) CheckGraph(g *graph.Graph, ref GraphRef) error {
	if err := a.checkGraph(g, ref); err != nil {
		return fmt.Errorf("artifact of %s: graph %s: %w", a.Name, ref.File, err)
	}
	return nil
}

func (a *Artifact) checkGraph(g *graph.Graph, ref GraphRef) error {
	if g.Kind != ref.Kind || g.Rows != ref.Rows {
		return fmt.Errorf("holds a %s graph of %d rows, the manifest says %s of %d", g.Kind, g.Rows, ref.Kind, ref.Rows)
	}
	if want := logitRows(a, ref); g.LogitRows != want {
		return fmt.Errorf("computes %d rows of logits, expected %d", g.LogitRows, want)
	}
	for _, b := range g.Buffers {
		if !slices.Contains(a.Buffers, b.Name) {
			return fmt.Errorf("buffer %q is not among the manifest's buffers %v", b.Name, a.Buffers)
		}
	}
	params, ok := g.Buffer(graph.ParamsBuffer)
	if !ok || params.Kind != graph.KindParams || params.Size < graph.ParamsBytes(g.Rows) {
		return fmt.Errorf("has no params buffer of kind %s and at least %d bytes (%+v)", graph.KindParams, graph.ParamsBytes(g.Rows), params)
	}
	for name, word := range CurrentParams() {
		count := 1
		if name == graph.ParamTokens {
			count = g.Rows
		}
		if p, ok := g.Param(name); !ok || p.Offset != int64(4*word) || p.Count < count {
			return fmt.Errorf("params field %s is %+v, this runtime writes %d words at byte %d", name, p, count, 4*word)
		}
	}
	for _, p := range g.Params {
		if p.Offset < 0 || p.Count < 0 || p.Offset+4*int64(p.Count) > params.Size {
			return fmt.Errorf("params field %s (%d words at byte %d) is outside the %d-byte params buffer", p.Name, p.Count, p.Offset, params.Size)
		}
	}
	pipelines := a.pipelineKeys
	if pipelines == nil { // an artifact Load did not make (Load sets them)
		pipelines = keysOf(a.Pipelines)
	}
	for i := range g.Dispatches {
		d := &g.Dispatches[i]
		if a.missing(d.Kernel) {
			continue // only the cpu backend runs it; the GPU backends refuse the model
		}
		l, err := a.CheckDispatch(g, d)
		if err == nil && !pipelines[l.Pipeline.Key()] {
			err = fmt.Errorf("pipeline %s is not among the manifest's pipelines", l.Pipeline.Key())
		}
		if err != nil {
			return fmt.Errorf("dispatch %d (%s): %w", i, d.Kernel, err)
		}
	}
	return nil
}

// logitRows is how many rows of logits the graph ref names computes: a
// plain prefill graph computes the last row's only.
func logitRows(a *Artifact, ref GraphRef) int {
	if ref.Kind == graph.KindTrunk && !ref.AllLogits && a.Config != nil && ref.Rows > a.Config.Windows.MaxDecodeRows {
		return 1
	}
	return ref.Rows
}

// Launch is a dispatch checked against the manifest (CheckDispatch): its
// kernel, its pipeline, and its argument struct's bytes (nil without one).
type Launch struct {
	Kernel   *Kernel
	Pipeline Pipeline
	Args     []byte
}

// CheckDispatch checks dispatch d against the manifest and returns its
// launch: a kernel of d's family, a binding of each of its buffers at its
// slot with its name, the access it declares (written or read-only) and a
// range of whole elements of its type, the params buffer at its params
// slot, a value for every required function constant it reads that fits
// the constant's type, and scalars that encode to the argument struct it
// takes. Every backend that binds a dispatch of g relies on this much.
func (a *Artifact) CheckDispatch(g *graph.Graph, d *graph.Dispatch) (Launch, error) {
	kindOf := func(name string) string {
		b, _ := g.Buffer(name)
		return b.Kind
	}
	k, ok := a.Kernel(d.Kernel)
	if !ok {
		return Launch{}, fmt.Errorf("kernels.metal has no kernel %s", d.Kernel)
	}
	if d.Family != k.Family {
		return Launch{}, fmt.Errorf("family %s, its kernel's is %s", d.Family, k.Family)
	}
	if len(d.Args) != len(k.Buffers) {
		return Launch{}, fmt.Errorf("%d bindings, its kernel takes %d buffers", len(d.Args), len(k.Buffers))
	}
	for i, b := range d.Args {
		kb := k.Buffers[i]
		if b.Slot != kb.Slot || b.Name != kb.Name {
			return Launch{}, fmt.Errorf("binding %s at slot %d, where its kernel takes %s at slot %d", b.Name, b.Slot, kb.Name, kb.Slot)
		}
		if writes := b.Access != graph.Read; writes != kb.Write {
			return Launch{}, fmt.Errorf("binding %s has access %q, its kernel's %s buffer %s is %s", b.Name, b.Access, kb.Space, kb.Name, map[bool]string{true: "written", false: "read-only"}[kb.Write])
		}
		if kb.Name == graph.ParamsBuffer && kindOf(b.Buffer) != graph.KindParams {
			return Launch{}, fmt.Errorf("binding %s is to buffer %q of kind %s, the kernel's params slot takes the params buffer", b.Name, b.Buffer, kindOf(b.Buffer))
		}
		if size := int64(ElemSize(kb.Type)); size == 0 || b.Offset%size != 0 || b.Size%size != 0 {
			return Launch{}, fmt.Errorf("binding %s is [%d,%d) of buffer %q, not whole %ss", b.Name, b.Offset, b.End(), b.Buffer, kb.Type)
		}
	}
	p, err := a.Pipeline(d)
	if err != nil {
		return Launch{}, err
	}
	for _, idx := range k.Constants {
		c := a.constant(idx)
		if c == nil {
			return Launch{}, fmt.Errorf("kernel %s reads function constant %d, which kernels.metal does not declare", k.Name, idx)
		}
		i := slices.IndexFunc(p.Values, func(v ConstValue) bool { return v.Index == idx })
		switch {
		case i < 0 && !c.Optional:
			return Launch{}, fmt.Errorf("kernel %s reads function constant %s (%d), which the dispatch does not set", k.Name, c.Name, idx)
		case i >= 0 && !c.Fits(p.Values[i].Value):
			return Launch{}, fmt.Errorf("function constant %s = %d does not fit a %s", c.Name, p.Values[i].Value, c.Type)
		}
	}
	args, err := a.EncodeArgs(d.Family, d.Scalars)
	if err != nil {
		return Launch{}, err
	}
	if want := max(k.ArgsSize, 0); k.ArgsSlot < 0 && len(args) > 0 || k.ArgsSlot >= 0 && len(args) != want {
		return Launch{}, fmt.Errorf("its %d scalars make a %d-byte argument struct, its kernel takes %d bytes at slot %d", len(d.Scalars), len(args), k.ArgsSize, k.ArgsSlot)
	}
	return Launch{Kernel: k, Pipeline: p, Args: args}, nil
}

// missing reports whether kernels.metal lacks kernel name on purpose (Missing).
func (a *Artifact) missing(name string) bool {
	for _, m := range a.Missing {
		if k, _, _ := strings.Cut(m, ":"); k == name {
			return true
		}
	}
	return false
}

// constant returns the function constant at index idx, nil if none.
func (a *Artifact) constant(idx int) *FunctionConstant {
	for i := range a.Constants {
		if a.Constants[i].Index == idx {
			return &a.Constants[i]
		}
	}
	return nil
}
