package artifact

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/strata-llm/strata/graph"
)

// ArgStruct is the MSL layout of a kernel family's argument struct (what a
// dispatch's scalars become, bound with setBytes after its last buffer), as
// data: the generator computes it once and the backends encode from it.
type ArgStruct struct {
	Family graph.Family `json:"family"`
	Name   string       `json:"name"` // the MSL type, e.g. rmsnorm_args
	Size   int          `json:"size"`
	Align  int          `json:"align"`
	// Optional: only dispatches with scalars take the struct (the router's
	// λ exists only with MoCE); one without scalars binds nothing.
	Optional bool       `json:"optional,omitempty"`
	Fields   []ArgField `json:"fields"`
}

// ArgField is one member of an argument struct.
type ArgField struct {
	Name   string `json:"name"`
	Type   string `json:"type"` // MSL type; dispatch scalars fill float members
	Offset int    `json:"offset"`
}

// ArgFloat is the MSL type a dispatch's scalars are encoded as.
const ArgFloat = "float"

// ArgStruct returns the argument struct of family.
func (a *Artifact) ArgStruct(family graph.Family) (*ArgStruct, bool) {
	for i := range a.Args {
		if a.Args[i].Family == family {
			return &a.Args[i], true
		}
	}
	return nil, false
}

// EncodeArgs turns a dispatch's scalars (graph: float32, in the struct's
// member order) into its family's argument struct bytes in MSL layout; nil
// for a dispatch that takes none.
func (a *Artifact) EncodeArgs(family graph.Family, scalars []graph.Scalar) ([]byte, error) {
	s, ok := a.ArgStruct(family)
	if !ok || s.Optional && len(scalars) == 0 {
		if len(scalars) == 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("artifact of %s: kernel family %q has no argument struct", a.Name, family)
	}
	if len(scalars) != len(s.Fields) {
		return nil, fmt.Errorf("artifact of %s: %s has %d scalars, its argument struct %s %d fields", a.Name, family, len(scalars), s.Name, len(s.Fields))
	}
	out := make([]byte, s.Size)
	for i, f := range s.Fields {
		if f.Name != scalars[i].Name || f.Type != ArgFloat || f.Offset+4 > s.Size {
			return nil, fmt.Errorf("artifact of %s: %s scalar %d is %s, its argument struct %s has %s %s at offset %d", a.Name, family, i, scalars[i].Name, s.Name, f.Type, f.Name, f.Offset)
		}
		binary.LittleEndian.PutUint32(out[f.Offset:], math.Float32bits(float32(scalars[i].Value)))
	}
	return out, nil
}
