package gguf

import (
	"strconv"
	"strings"
)

// What strata adds to a GGUF file, beyond what llama.cpp reads. Every key is
// under "strata.", which llama.cpp ignores.
const (
	// KeyConfig holds the model's whole model.toml, so a file runs with
	// nothing beside it (and its window graphs can be rebuilt from it).
	KeyConfig = "strata.config"
	// KeyExactPrefix + tensor name holds a transformed tensor's role values
	// (float32 array) as the checkpoint had them: +1 and −exp do not invert
	// exactly in float32, and strata reproduces the HF path bit for bit.
	KeyExactPrefix = "strata.exact."
	// KeyRowLengthPrefix + tensor name holds the real row length of a tensor
	// whose rows are zero-padded to whole blocks (its ne0 is the padded one).
	KeyRowLengthPrefix = "strata.row_length."
	// KeyNextNLayers is how many MTP ("next-n") blocks follow the trunk's, as
	// llama.cpp counts them for the architectures it runs MTP on.
	KeyNextNLayers = "nextn_predict_layers"
)

// KeyQwen4ExpNames records which revision of this name map wrote a file (it
// follows readings of llama.cpp's converter, not the converter itself, so a
// correction bumps it and older files stay recognisable).
const (
	KeyQwen4ExpNames     = "strata.qwen4exp_names"
	Qwen4ExpNamesVersion = 1
)

// BlockOf returns N for a tensor called "blk.N.…".
func BlockOf(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, ".")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n < 0 || strconv.Itoa(n) != num {
		return 0, false
	}
	return n, true
}
