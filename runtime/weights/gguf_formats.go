package weights

import (
	"fmt"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/format/gguf"
)

// FileFormats returns the storage format of every device role as the file
// holds it: the ggml type of its tensors, so each role is read as it lies,
// never quantized again. A role that cannot be read block for block from its
// tensors (value-transformed, several tensors of different types, column runs
// that split blocks) is decoded once to f32, which is exact; small roles
// (norms, gates, conv taps) are f32 whatever the file stores, as the kernels
// read them. A tensor of a ggml type strata cannot decode is refused by name
// (through Check's resolve).
func (g *GGUF) FileFormats(specs []models.TensorSpec) (*models.TensorFormats, error) {
	out := &models.TensorFormats{ByName: map[string]string{}}
	for _, s := range specs {
		if s.Host() || s.Small {
			continue
		}
		r, err := g.resolve(s)
		if err != nil {
			return nil, err
		}
		out.ByName[s.Name] = r.fileFormat()
	}
	return out, nil
}

// fileFormat is the format a role is read in without quantizing again.
func (r *ggufRole) fileFormat() string {
	f := r.segs[0].src.Format
	for _, seg := range r.segs[1:] {
		if seg.src.Format != f || seg.src.Stored != r.segs[0].src.Stored {
			return "f32"
		}
	}
	if r.tr != gguf.Same {
		return "f32"
	}
	for _, c := range r.cols {
		if r.segs[0].src.Padded() || c.TensorCol%f.BlockElems != 0 || c.RoleCol%f.BlockElems != 0 || c.Cols%f.BlockElems != 0 {
			return "f32"
		}
	}
	return f.Name
}

// WithFileFormats returns a copy of cfg whose quant plan names, per role,
// the format the file holds it in (FileFormats), and makes g read for it.
//
// A qwen3next file with attn_qkv and attn_gate (llama.cpp's current layout,
// and strata's) runs its GDN input projections split (SplitProjections):
// those two tensors are then used in place, whatever formats they are in.
func (g *GGUF) WithFileFormats(cfg *models.Config) (*models.Config, error) {
	c := *cfg
	if c.Architecture.ModelType == models.TypeQwen3Next && g.splitGDN {
		c.Architecture.LinearAttention.SplitProjections = true
	}
	tf, err := g.FileFormats(c.Tensors())
	if err != nil {
		return nil, err
	}
	c.Quant.Tensors = tf
	g.cfg = &c
	g.noRequant = true
	return &c, nil
}

// requantizes reports the error Read returns when it would quantize a
// tensor again: a quantized destination in a format or row layout other
// than the tensor's own.
func (g *GGUF) requantizes(spec models.TensorSpec, seg ggufSegment, rl quant.RowLayout) error {
	if !g.noRequant || rl.Format.BlockElems == 1 || seg.src == rl {
		return nil
	}
	return fmt.Errorf("gguf %s: tensor %s (role %s) is stored as %s; reading it as %s would quantize it again, which strata never does at load", g.f.Path, seg.ti.Name, spec.Name, describe(seg.src), describe(rl))
}
