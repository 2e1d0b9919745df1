package arch

import (
	"errors"
	"fmt"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/format/gguf"
)

// QwenNext is Qwen3-Next (HF model_type qwen3_next, GGUF architecture
// qwen3next, llama.cpp's src/models/qwen3next.cpp): Gated DeltaNet layers
// with a gated full-attention layer every full_attention_interval, MoE with
// a shared expert in every layer. ../shared/specs/qwen3_next.md §8 is the
// source of the keys. What no key says (HF's defaults for Qwen3-Next's
// released configs, docs/gguf.md): hidden_act silu, norm_topk_prob true,
// decoder_sparse_step 1, no MTP head read back.
var QwenNext = &Arch{
	GGUF:      gguf.ArchQwenNext,
	ModelType: models.TypeQwen3Next,
	Params: []Param{
		pBlockCount,
		pContext,
		pHidden,
		field("feed_forward_length", "intermediate_size", "architecture.moe.dense_intermediate_size", func(a *models.Architecture) *int { return &a.MoE.DenseIntermediateSize }),
		pHeads,
		pKVHeads,
		pKeyLength,
		pValueLength,
		rmsEps(false),
		ropeTheta(false),
		pRopeDim,
		pExperts,
		pExpertsUsed,
		pExpertFFN,
		pSharedFFN,
		pConvKernel,
		pInnerSize,
		pStateSize,
		pTimeStepRank,
		pGroupCount,
		pInterval(models.LayerFullAttention, func(a *models.Architecture, v Value, m Meta) error {
			// HF's qwen3_next config: every interval-th layer is full attention.
			if v.Int < 1 {
				return fmt.Errorf("gguf %s: %s = %d, want a positive interval", m.f.Path, m.Key("full_attention_interval"), v.Int)
			}
			if a.NumLayers > maxLayers { // a corrupt count must not allocate gigabytes
				return fmt.Errorf("gguf %s: %s = %d, want at most %d", m.f.Path, m.Key(pBlockCount.Key), a.NumLayers, maxLayers)
			}
			a.LayerTypes = make([]string, a.NumLayers)
			for i := range a.LayerTypes {
				a.LayerTypes[i] = models.LayerLinearAttention
				if (i+1)%v.Int == 0 {
					a.LayerTypes[i] = models.LayerFullAttention
				}
			}
			return nil
		}),
		pNextN(nil), // written for the MTP head; llama.cpp's files have none, so a reader keeps none
	},
	writable: func(a *models.Architecture) []error {
		var errs []error
		if !a.Attention.OutputGate {
			errs = append(errs, errors.New("attention.output_gate is false (qwen3next GGUF assumes gated attention)"))
		}
		if la := a.LinearAttention; la.GateAct != "" && la.GateAct != "silu" {
			errs = append(errs, fmt.Errorf("linear_attention.gate_act is %q (qwen3next uses silu)", la.GateAct))
		}
		if _, err := fullAttentionInterval(a.LayerTypes, models.LayerFullAttention); err != nil {
			errs = append(errs, err)
		}
		return errs
	},
	finish: func(f *gguf.File, a *models.Architecture, _ Meta) error {
		if err := vocabAndTie(f, a); err != nil {
			return err
		}
		a.HiddenAct = "silu"
		a.Attention.OutputGate = true
		a.LinearAttention.GateAct = "silu"
		a.MoE.NormTopKProb, a.MoE.DecoderSparseStep = true, 1
		eos, err := eosOf(f)
		if err != nil {
			return err
		}
		if eos >= 0 {
			a.EOSTokenIDs = []int{eos}
		}
		return nil
	},
	names: func(c *models.Config, has func(string) bool) Names {
		a := &c.Architecture
		// We write llama.cpp's current form: attn_qkv + attn_gate for the
		// GDN input, gate and up experts apart, q/k/v apart.
		var form gguf.QwenNextForm
		gdn, attn := -1, -1
		for l, t := range a.LayerTypes {
			if t == models.LayerLinearAttention && gdn < 0 {
				gdn = l
			}
			if t == models.LayerFullAttention && attn < 0 {
				attn = l
			}
		}
		if has != nil {
			form = gguf.DetectQwenNextForm(has, gdn, attn)
		}
		dims := QwenNextDims(c)
		return Names{
			Role: func(role string) (gguf.RoleMap, error) {
				return gguf.QwenNextModelRole(dims, form, a.NumLayers, role)
			},
			SplitGDN: has != nil && gdn >= 0 && !form.LegacySSMIn,
		}
	},
}

// maxLayers bounds a layer count read from a file.
const maxLayers = 1 << 16

// QwenNextDims are the sizes the qwen3next name map needs, from a config.
func QwenNextDims(c *models.Config) gguf.QwenNextDims {
	a := &c.Architecture
	la := a.LinearAttention
	return gguf.QwenNextDims{
		KeyHeads: la.NumKeyHeads, ValueHeads: la.NumValueHeads, KeyHeadDim: la.KeyHeadDim, ValueHeadDim: la.ValueHeadDim,
		Heads: a.Attention.NumHeads, KVHeads: a.Attention.NumKVHeads, HeadDim: a.Attention.HeadDim,
		OutputGate: a.Attention.OutputGate, ExpertFFN: a.MoE.IntermediateSize,
	}
}
