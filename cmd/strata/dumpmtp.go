package main

import (
	"fmt"

	"github.com/strata-llm/strata/runtime/eval"
	"github.com/strata-llm/strata/runtime/format/safetensors"
	"github.com/strata-llm/strata/runtime/load"
)

// mtpTensor is --dump-mtp's tensor: the MTP head's teacher-forced logits
// over the fed tokens (eval.MTPLogits), from a second, fresh pass in
// windows of the run's prefill rows.
func mtpTensor(l *load.Loaded, fed []int) (safetensors.Tensor, error) {
	t, err := eval.MTPLogits(l.Model, fed, l.PrefillRows)
	if err != nil {
		return t, fmt.Errorf("--dump-mtp: %w", err)
	}
	return t, nil
}
