package eval

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/format/safetensors"
)

// MTPLogits is the MTP head's logits over the fed tokens as tensor
// "mtp_logits" f32 [len(fed)−1, vocab]: row t is the head's logits for
// fed[t+2] from the trunk's state at t and the true fed[t+1]
// (teacher-forced, as tiny-go's reference), from a fresh pass over fed in
// windows of rows.
func MTPLogits(m *engine.Model, fed []int, rows int) (safetensors.Tensor, error) {
	if !m.HasMTP() {
		return safetensors.Tensor{}, fmt.Errorf("model %s has no MTP head (architecture.mtp.num_layers = 0, or its mtp.* tensors were not loaded)", m.Config.Name)
	}
	if len(fed) < 2 {
		return safetensors.Tensor{}, fmt.Errorf("%d fed token(s); the MTP head needs at least 2 (a position and the token after it)", len(fed))
	}
	_, heads, err := m.TeacherForced(fed, rows)
	if err != nil {
		return safetensors.Tensor{}, err
	}
	vocab := m.Config.Architecture.VocabSize
	data := make([]byte, 0, 4*vocab*len(heads))
	for _, r := range heads {
		for _, v := range r {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
		}
	}
	return safetensors.Tensor{Name: "mtp_logits", DType: "F32", Shape: []int{len(heads), vocab}, Data: data}, nil
}
