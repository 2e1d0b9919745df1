package gguf

import (
	"fmt"
	"math"
)

// How a model's tensor roles (models.Config.Tensors names) lie in a GGUF
// file: the types an architecture's name map (runtime/arch) answers with.
// GGUF ne is the torch shape reversed, so most roles are one tensor each,
// byte for byte; the rest are rows gathered from tensors (RowRun), columns
// reordered (ColRun), or values transformed (Transform). Row permutations
// act on whole rows, so they apply to quantized data as is.

// Transform relates a GGUF tensor's values to our role's values.
type Transform int

const (
	Same    Transform = iota
	PlusOne           // GGUF = 1 + role: the zero-centred RMSNorm weights
	NegExp            // GGUF = −exp(role): ssm_a from A_log
)

func (t Transform) String() string {
	switch t {
	case Same:
		return "same"
	case PlusOne:
		return "+1"
	case NegExp:
		return "-exp"
	}
	return fmt.Sprintf("Transform(%d)", int(t))
}

// ToGGUF maps one role value to its GGUF value (float32, as both are stored).
func (t Transform) ToGGUF(v float32) float32 {
	switch t {
	case PlusOne:
		return 1 + v
	case NegExp:
		return float32(-math.Exp(float64(v)))
	}
	return v
}

// FromGGUF inverts ToGGUF. For NegExp the GGUF value must be negative (a
// decay rate); anything else has no A_log and yields NaN.
func (t Transform) FromGGUF(v float32) float32 {
	switch t {
	case PlusOne:
		return v - 1
	case NegExp:
		return float32(math.Log(-float64(v)))
	}
	return v
}

// RowRun moves Rows rows: rows [TensorRow, TensorRow+Rows) of GGUF tensor
// Tensor are rows [RoleRow, RoleRow+Rows) of the role. For stacked expert
// tensors the rows count within each expert's slice.
type RowRun struct {
	Tensor             string
	TensorRow, RoleRow int
	Rows               int
}

// RoleMap says where one role lives in a GGUF file: either a whole tensor
// (Tensor, with Runs nil) or rows gathered from slices of tensors (Runs, in
// role row order, covering the role exactly), with the value transform. A
// whole tensor may hold each row's columns in another order (Cols, in role
// column order, covering the row exactly; nil: the same order).
type RoleMap struct {
	Role      string
	Tensor    string
	Runs      []RowRun
	Cols      []ColRun
	Transform Transform
}

// ColRun moves Cols columns of every row: columns [TensorCol, TensorCol+Cols)
// of the GGUF tensor are columns [RoleCol, RoleCol+Cols) of the role. A 1-D
// tensor is one row.
type ColRun struct {
	TensorCol, RoleCol, Cols int
}
