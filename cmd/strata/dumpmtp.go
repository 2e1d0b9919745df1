package main

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/strata-llm/strata/runtime/format/safetensors"
	"github.com/strata-llm/strata/runtime/load"
)

// mtpTensor is --dump-mtp's tensor "mtp_logits" f32 [len(fed)−1, vocab]: row
// t is the MTP head's logits for fed[t+2] from the trunk's state at t and the
// true fed[t+1] (teacher-forced, as tiny-go's reference), from a second,
// fresh pass over the fed tokens in windows of the run's prefill rows.
func mtpTensor(l *load.Loaded, fed []int) (safetensors.Tensor, error) {
	if !l.Model.HasMTP() {
		return safetensors.Tensor{}, fmt.Errorf("--dump-mtp: model %s has no MTP head (architecture.mtp.num_layers = 0, or its mtp.* tensors were not loaded)", l.Config.Name)
	}
	if len(fed) < 2 {
		return safetensors.Tensor{}, fmt.Errorf("--dump-mtp: %d fed token(s); the MTP head needs at least 2 (a position and the token after it)", len(fed))
	}
	_, rows, err := l.Model.TeacherForced(fed, l.PrefillRows)
	if err != nil {
		return safetensors.Tensor{}, fmt.Errorf("--dump-mtp: %w", err)
	}
	vocab := l.Config.Architecture.VocabSize
	data := make([]byte, 0, 4*vocab*len(rows))
	for _, r := range rows {
		for _, v := range r {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
		}
	}
	return safetensors.Tensor{Name: "mtp_logits", DType: "F32", Shape: []int{len(rows), vocab}, Data: data}, nil
}
