package arch

// The HF checkpoint tensor names of the roles (models.Config.Tensors), which
// both architectures share: HF's Qwen3-Next and Qwen3.8-Flash-Next modules
// name the pieces they have in common alike, and a role only one of them has
// never occurs in the other's config. weights.HF reads through them.

// HFTop maps the roles outside the layers to HF checkpoint tensors; {text}
// stands for the decoder's prefix (model. or model.language_model.).
var HFTop = map[string]string{
	"embed":                     "{text}embed_tokens.weight",
	"final_norm":                "{text}norm.weight",
	"head":                      "lm_head.weight",
	"mixer.norm":                "{text}hyper_connection_mixer.hc_norm.weight",
	"mixer.down":                "{text}hyper_connection_mixer.input_mix_weight_down.weight",
	"mixer.up":                  "{text}hyper_connection_mixer.input_mix_weight_up.weight",
	"mtp.fc":                    "mtp.fc.weight",
	"mtp.norm":                  "mtp.norm.weight",
	"mtp.fc_embedding":          "mtp.fc_embedding.weight",
	"mtp.fc_hidden":             "mtp.fc_hidden.weight",
	"mtp.pre_fc_norm_embedding": "mtp.pre_fc_norm_embedding.weight",
	"mtp.pre_fc_norm_hidden":    "mtp.pre_fc_norm_hidden.weight",
	"mtp.mixer.norm":            "mtp.hyper_connection_mixer.hc_norm.weight",
	"mtp.mixer.down":            "mtp.hyper_connection_mixer.input_mix_weight_down.weight",
	"mtp.mixer.up":              "mtp.hyper_connection_mixer.input_mix_weight_up.weight",
}

// HFLayer maps the per-layer roles that are one HF tensor each, under a
// layer's prefix (model.layers.{l}. or mtp.layers.{l}.).
var HFLayer = map[string]string{
	// qwen4_exp: hyper-connections, separate GDN projections, the QSA indexer, PLE.
	"attn_hc.norm":      "attn_hyper_connection.hc_norm.weight",
	"attn_hc.down":      "attn_hyper_connection.input_mix_weight_down.weight",
	"attn_hc.up":        "attn_hyper_connection.input_mix_weight_up.weight",
	"attn_hc.inject":    "attn_hyper_connection.block_inject_weight.weight",
	"mlp_hc.norm":       "mlp_hyper_connection.hc_norm.weight",
	"mlp_hc.down":       "mlp_hyper_connection.input_mix_weight_down.weight",
	"mlp_hc.up":         "mlp_hyper_connection.input_mix_weight_up.weight",
	"mlp_hc.inject":     "mlp_hyper_connection.block_inject_weight.weight",
	"gdn.qkv":           "linear_attn.in_proj_qkv.weight",
	"gdn.z":             "linear_attn.in_proj_z.weight",
	"gdn.b":             "linear_attn.in_proj_b.weight",
	"gdn.a":             "linear_attn.in_proj_a.weight",
	"attn.index_qk":     "self_attn.indexer.index_qk_proj.weight",
	"attn.index_q_norm": "self_attn.indexer.q_layernorm.weight",
	"attn.index_k_norm": "self_attn.indexer.k_layernorm.weight",
	"ple.key":           "ple.key_proj.weight",
	"ple.value":         "ple.value_proj.weight",
	"ple.norm_key":      "ple.norm_key.weight",
	"ple.norm_query":    "ple.norm_query.weight",
	"ple.norm_conv":     "ple.norm_conv.weight",
	"ple.conv":          "ple.conv1d.weight",
	// both
	"attn_norm":       "input_layernorm.weight",
	"ffn_norm":        "post_attention_layernorm.weight",
	"gdn.qkvz":        "linear_attn.in_proj_qkvz.weight",
	"gdn.ba":          "linear_attn.in_proj_ba.weight",
	"gdn.conv":        "linear_attn.conv1d.weight",
	"gdn.a_log":       "linear_attn.A_log",
	"gdn.dt_bias":     "linear_attn.dt_bias",
	"gdn.norm":        "linear_attn.norm.weight",
	"gdn.out":         "linear_attn.out_proj.weight",
	"attn.q":          "self_attn.q_proj.weight",
	"attn.k":          "self_attn.k_proj.weight",
	"attn.v":          "self_attn.v_proj.weight",
	"attn.o":          "self_attn.o_proj.weight",
	"attn.q_norm":     "self_attn.q_norm.weight",
	"attn.k_norm":     "self_attn.k_norm.weight",
	"moe.router":      "mlp.gate.weight",
	"moe.shared.gate": "mlp.shared_expert.gate_proj.weight",
	"moe.shared.up":   "mlp.shared_expert.up_proj.weight",
	"moe.shared.down": "mlp.shared_expert.down_proj.weight",
	"moe.shared_gate": "mlp.shared_expert_gate.weight",
}

// HFExpert says where a routed-expert role lies in an HF checkpoint.
type HFExpert struct {
	Proj  string // per expert: mlp.experts.{e}.<Proj>.weight
	Fused string // all experts: mlp.experts.<Fused>[.weight]
	Half  int    // -1: the whole fused tensor; 0/1: gate/up half of each expert (gate_up_proj holds gate rows first)
}

// HFExperts maps the routed-expert roles.
var HFExperts = map[string]HFExpert{
	"moe.experts.gate": {"gate_proj", "gate_up_proj", 0},
	"moe.experts.up":   {"up_proj", "gate_up_proj", 1},
	"moe.experts.down": {"down_proj", "down_proj", -1},
}
