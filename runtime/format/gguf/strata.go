package gguf

import (
	"fmt"
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

// MTP tensors of qwen3next. llama.cpp has no Qwen3-Next MTP tensors; we
// follow its "next-n" names (GLM-4.5's): MTP layer i is block
// num_layers + i, with the decoder layer's usual names plus these.
var qwenNextMTP = map[string]struct {
	name string
	tr   Transform
}{
	"mtp.fc":                    {"nextn.eh_proj.weight", Same},             // [norm(e) ‖ norm(h)] → hidden
	"mtp.pre_fc_norm_embedding": {"nextn.enorm.weight", PlusOne},            // zero-centred, like every norm
	"mtp.pre_fc_norm_hidden":    {"nextn.hnorm.weight", PlusOne},            //
	"mtp.norm":                  {"nextn.shared_head_norm.weight", PlusOne}, // before the shared head
}

// QwenNextModelRole is QwenNextRole for a whole model of numLayers trunk
// layers: it also maps the MTP head's roles ("mtp.fc", "mtp.layers.0.attn.q",
// …) to blocks numLayers, numLayers+1, … .
func QwenNextModelRole(d QwenNextDims, form QwenNextForm, numLayers int, role string) (RoleMap, error) {
	rest, ok := strings.CutPrefix(role, "mtp.")
	if !ok {
		return QwenNextRole(d, form, role)
	}
	if m, ok := qwenNextMTP[role]; ok {
		// One set of next-n tensors, on the first MTP block.
		return RoleMap{Role: role, Tensor: fmt.Sprintf("blk.%d.%s", numLayers, m.name), Transform: m.tr}, nil
	}
	l, sub, ok := splitLayerRole(rest)
	if !ok {
		return RoleMap{}, fmt.Errorf("qwen3next: no GGUF tensor for role %q", role)
	}
	m, err := QwenNextRole(d, form, "layers."+strconv.Itoa(numLayers+l)+"."+sub)
	if err != nil {
		return RoleMap{}, fmt.Errorf("qwen3next: role %s: %w", role, err)
	}
	m.Role = role
	return m, nil
}

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
