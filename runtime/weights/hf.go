// Package weights fills the engine's weight buffers from checkpoints. It maps
// our tensor roles (models.TensorSpec names such as "layers.3.attn.q") to the
// tensors of a checkpoint and converts them to the planned storage format.
package weights

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/arch"
	"github.com/strata-llm/strata/runtime/format/safetensors"
)

// HF reads weights from a Hugging Face safetensors checkpoint. It is not safe
// for concurrent use.
type HF struct {
	ck  *safetensors.Checkpoint
	cfg *models.Config
	// resolved caches bindings: a stacked expert role is read once per expert,
	// and resolving it looks up every expert's tensor.
	resolved map[string]*binding
}

// NewHF returns a reader of ck for the model described by cfg. Nothing is
// checked here; call Check before loading to see every problem at once.
func NewHF(ck *safetensors.Checkpoint, cfg *models.Config) *HF {
	return &HF{ck: ck, cfg: cfg, resolved: map[string]*binding{}}
}

// binding is a role resolved against the checkpoint: the source tensors, and
// how the role's elements are laid out in them.
type binding struct {
	role  string
	names []string // HF names, one per source tensor
	srcs  []safetensors.Tensor
	shape []int // the role's shape (spec.Shape)
	slab  int   // elements per index along the leading dimension
	// Per-expert form: srcs[e] is expert e. Otherwise srcs[0] holds all, and
	// slice i lies at i*stride+offset in it.
	perExpert      bool
	stride, offset int
}

// segment is a run of n elements of one source tensor, starting at element start.
type segment struct {
	name     string
	t        safetensors.Tensor
	start, n int
}

// segments lists, in output order, the source runs making up the whole role
// (index -1) or its index-th leading slice.
func (b *binding) segments(index int) ([]segment, int, error) {
	lead := 1
	if len(b.shape) > 0 {
		lead = b.shape[0]
	}
	var idx []int
	switch {
	case index == -1:
		for i := range lead {
			idx = append(idx, i)
		}
	case index >= 0 && index < lead && len(b.shape) > 0:
		idx = []int{index}
	default:
		return nil, 0, fmt.Errorf("role %s (tensor %s): index %d out of range [0,%d) of shape %v", b.role, b.names[0], index, lead, b.shape)
	}
	segs := make([]segment, 0, len(idx))
	for _, i := range idx {
		if b.perExpert {
			segs = append(segs, segment{b.names[i], b.srcs[i], 0, b.slab})
		} else {
			segs = append(segs, segment{b.names[0], b.srcs[0], i*b.stride + b.offset, b.slab})
		}
	}
	// Direct tensors read whole are one run; merging keeps the copy fast path wide.
	if index == -1 && !b.perExpert && b.stride == b.slab && b.offset == 0 {
		segs = []segment{{b.names[0], b.srcs[0], 0, lead * b.slab}}
	}
	return segs, len(idx) * b.slab, nil
}

// Read writes the tensor for spec.Name into dst in storage format format, in
// row-major order of spec.Shape. index -1 asks for the whole tensor; index
// ≥ 0 for the index-th slice along the leading dimension (one routed expert
// of a stacked [E, rows, cols] role). len(dst) must be exactly the size asked.
func (h *HF) Read(spec models.TensorSpec, index int, format string, dst []byte) error {
	f, err := quant.Lookup(format)
	if err != nil {
		return fmt.Errorf("role %s: %w", spec.Name, err)
	}
	if f.Encode == nil {
		return fmt.Errorf("role %s: format %s cannot be encoded from float32", spec.Name, format)
	}
	b, ok := h.resolved[spec.Name]
	if !ok || !slices.Equal(b.shape, spec.Shape) {
		if b, err = h.resolve(spec); err != nil {
			return err
		}
		h.resolved[spec.Name] = b
	}
	segs, n, err := b.segments(index)
	if err != nil {
		return h.withFile(err, b.names[0])
	}
	rl, err := rowLayout(spec, f)
	if err != nil {
		return err
	}
	if want := n / rl.Len * rl.RowBytes(); len(dst) != want {
		return fmt.Errorf("role %s: destination has %d bytes, want %d for %d rows of %d stored as %s", spec.Name, len(dst), want, n/rl.Len, rl.Len, describe(rl))
	}
	off := 0
	for _, s := range segs {
		if s.n%rl.Len != 0 {
			return fmt.Errorf("role %s: a run of %d elements from %s is not whole rows of %d", spec.Name, s.n, s.name, rl.Len)
		}
		size := s.n / rl.Len * rl.RowBytes()
		if err := convert(s, rl, dst[off:off+size]); err != nil {
			return h.withFile(fmt.Errorf("role %s: tensor %s: %w", spec.Name, s.name, err), s.name)
		}
		off += size
	}
	return nil
}

// rowLayout is how the rows of spec are stored in format f: as they are when
// they are whole blocks, else zero-padded to whole blocks (the planner has
// already chosen between padding and a fallback format; given the format,
// padding is the only way left).
func rowLayout(spec models.TensorSpec, f *quant.Format) (quant.RowLayout, error) {
	if len(spec.Shape) == 0 || spec.Shape[len(spec.Shape)-1] <= 0 {
		return quant.RowLayout{}, fmt.Errorf("role %s: shape %v has no rows", spec.Name, spec.Shape)
	}
	rl, err := quant.ForRow(f.Name, spec.Shape[len(spec.Shape)-1], quant.Pad)
	if err != nil {
		return rl, fmt.Errorf("role %s: %w", spec.Name, err)
	}
	return rl, nil
}

// describe names a row layout for messages: "q8_0" or "iq2_xs padded to 768".
func describe(rl quant.RowLayout) string {
	if rl.Padded() {
		return fmt.Sprintf("%s padded to %d", rl.Format.Name, rl.Stored)
	}
	return rl.Format.Name
}

// sourceFormats maps the checkpoint dtypes we load to their quant formats.
var sourceFormats = map[string]string{"F32": "f32", "F16": "f16", "BF16": "bf16"}

// convChunk bounds the float32 scratch of a conversion (256 KiB per worker).
const convChunk = 1 << 16

// convert decodes the segment's source elements and encodes them into dst in
// layout to. Quantizing is slow (tens of µs per block for the IQ formats), so
// chunks are encoded on every core.
func convert(s segment, to quant.RowLayout, dst []byte) error {
	from, err := quant.Lookup(sourceFormats[s.t.DType])
	if err != nil {
		return err
	}
	src := s.t.Data[from.Bytes(s.start):from.Bytes(s.start+s.n)]
	if from.Name == to.Format.Name && !to.Padded() {
		copy(dst, src) // exact, and keeps NaN payloads
		return nil
	}
	return TranscodeRows(src, quant.RowLayout{Format: from, Len: to.Len, Stored: to.Len}, dst, to, s.n/to.Len, nil)
}

// TranscodeRows converts rows stored as from (src) into rows stored as to
// (dst) through float32, applying fn (when not nil) to each decoded row.
// Work is split across cores in chunks of whole rows.
func TranscodeRows(src []byte, from quant.RowLayout, dst []byte, to quant.RowLayout, rows int, fn func([]float32)) error {
	if from.Len != to.Len {
		return fmt.Errorf("rows of %d elements cannot become rows of %d", from.Len, to.Len)
	}
	if len(src) < rows*from.RowBytes() || len(dst) < rows*to.RowBytes() {
		return fmt.Errorf("%d rows need %d source and %d destination bytes, have %d and %d", rows, rows*from.RowBytes(), rows*to.RowBytes(), len(src), len(dst))
	}
	if to.Format.Encode == nil || from.Format.Decode == nil {
		return fmt.Errorf("no codec from %s to %s", from.Format.Name, to.Format.Name)
	}
	fb, tb := from.RowBytes(), to.RowBytes()
	// Unpadded rows of block formats can be converted many rows per call.
	perChunk := max(1, convChunk/max(to.Stored, 1))
	parallelRows(rows, perChunk, func(lo, hi int) {
		if !from.Padded() && !to.Padded() && fn == nil {
			buf := make([]float32, (hi-lo)*to.Len)
			from.Format.Decode(src[lo*fb:hi*fb], buf)
			to.Format.Encode(buf, dst[lo*tb:hi*tb])
			return
		}
		buf := make([]float32, to.Len)
		for r := lo; r < hi; r++ {
			from.DecodeRow(src[r*fb:(r+1)*fb], buf)
			if fn != nil {
				fn(buf)
			}
			to.EncodeRow(buf, dst[r*tb:(r+1)*tb])
		}
	})
	return nil
}

// parallelRows runs body over [0, rows) in chunks of up to per rows, on every
// core when there is more than one chunk.
func parallelRows(rows, per int, body func(lo, hi int)) {
	chunks := (rows + per - 1) / per
	workers := min(runtime.GOMAXPROCS(0), chunks)
	if workers <= 1 {
		for lo := 0; lo < rows; lo += per {
			body(lo, min(lo+per, rows))
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c := int(next.Add(1)) - 1
				if c >= chunks {
					return
				}
				body(c*per, min((c+1)*per, rows))
			}
		}()
	}
	wg.Wait()
}

// Check resolves every spec against the checkpoint (presence, shape, dtype)
// and returns all problems joined, so a user sees every bad tensor at once.
func (h *HF) Check(specs []models.TensorSpec) error {
	var errs []error
	for _, s := range specs {
		if s.Host() {
			if _, err := h.NgramTable(s); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if _, err := h.resolve(s); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// resolve finds the checkpoint tensors behind a role and validates them.
func (h *HF) resolve(spec models.TensorSpec) (*binding, error) {
	if h.cfg == nil {
		return nil, fmt.Errorf("role %s: no model config", spec.Name)
	}
	mt := h.cfg.Architecture.ModelType
	if mt != models.TypeQwen3Next && mt != models.TypeQwen4Exp {
		return nil, fmt.Errorf("role %s: no HF tensor mapping for model type %q", spec.Name, mt)
	}
	b := &binding{role: spec.Name, shape: spec.Shape, slab: spec.Elements()}
	if len(spec.Shape) > 0 && spec.Shape[0] > 0 {
		b.slab /= spec.Shape[0]
	}
	b.stride = b.slab
	text := h.textPrefix()

	if name, ok := arch.HFTop[spec.Name]; ok {
		name = strings.Replace(name, "{text}", text, 1)
		// Tied: HF points lm_head at the embeddings, whatever the file holds.
		if spec.Name == "head" && h.cfg.Architecture.TieWordEmbeddings {
			name = text + "embed_tokens.weight"
		}
		return b, h.direct(b, name, spec.Shape)
	}

	prefix, role, ok := h.splitLayer(spec.Name)
	if !ok {
		return nil, fmt.Errorf("unknown tensor role %q for %s", spec.Name, mt)
	}
	if !strings.HasPrefix(prefix, "mtp.") {
		prefix = text + prefix
	}
	if name, ok := arch.HFLayer[role]; ok {
		hfShape := spec.Shape
		if (role == "gdn.conv" || role == "ple.conv") && len(spec.Shape) == 2 {
			// HF keeps Conv1d's in-channels-per-group axis (1); same bytes.
			hfShape = []int{spec.Shape[0], 1, spec.Shape[1]}
		}
		return b, h.direct(b, prefix+name, hfShape)
	}
	if ex, ok := arch.HFExperts[role]; ok {
		return b, h.experts(b, prefix, ex.Proj, ex.Fused, ex.Half)
	}
	return nil, fmt.Errorf("unknown tensor role %q for %s", spec.Name, mt)
}

// textPrefix is where the decoder's tensors live: "model." for text-only
// checkpoints (the oracles), "model.language_model." for the multimodal
// Qwen3.8 release.
func (h *HF) textPrefix() string {
	if _, ok := h.ck.Tensor("model.language_model.embed_tokens.weight"); ok {
		return "model.language_model."
	}
	return "model."
}

// splitLayer parses "layers.{l}.{role}" (l a layer of the config) or
// "mtp.layers.{l}.{role}" (l an MTP layer) into the layer's prefix and role.
func (h *HF) splitLayer(name string) (string, string, bool) {
	group, count := "layers.", h.cfg.Architecture.NumLayers
	rest, ok := strings.CutPrefix(name, "layers.")
	if !ok {
		if rest, ok = strings.CutPrefix(name, "mtp.layers."); !ok {
			return "", "", false
		}
		group, count = "mtp.layers.", h.cfg.Architecture.MTP.NumLayers
	}
	num, role, ok := strings.Cut(rest, ".")
	if !ok {
		return "", "", false
	}
	l, err := strconv.Atoi(num)
	if err != nil || l < 0 || l >= count || strconv.Itoa(l) != num {
		return "", "", false
	}
	return group + num + ".", role, true
}

// direct binds a role stored as one HF tensor of shape want.
func (h *HF) direct(b *binding, name string, want []int) error {
	t, err := h.lookup(b.role, name, want)
	if err != nil {
		return err
	}
	b.names, b.srcs = []string{name}, []safetensors.Tensor{t}
	return nil
}

// experts binds a stacked [E, rows, cols] role, from per-expert tensors when
// the checkpoint has them, else from the fused form.
func (h *HF) experts(b *binding, prefix, proj, fused string, half int) error {
	if len(b.shape) != 3 {
		return fmt.Errorf("role %s: expected a stacked [experts, rows, cols] shape, got %v", b.role, b.shape)
	}
	E, rows, cols := b.shape[0], b.shape[1], b.shape[2]
	expertName := func(e int) string { return fmt.Sprintf("%smlp.experts.%d.%s.weight", prefix, e, proj) }

	if _, ok := h.ck.Tensor(expertName(0)); ok || E == 0 {
		b.perExpert = true
		var errs []error
		missing := 0
		for e := range E {
			name := expertName(e)
			t, err := h.lookup(b.role, name, b.shape[1:])
			if err != nil {
				if _, present := h.ck.Tensor(name); present {
					errs = append(errs, err) // wrong shape or dtype
				} else if missing++; missing == 1 {
					errs = append(errs, err) // name the first missing expert, count the rest
				}
				continue
			}
			b.names = append(b.names, name)
			b.srcs = append(b.srcs, t)
		}
		if missing > 1 {
			errs = append(errs, fmt.Errorf("checkpoint %s lacks %d of %d experts for role %s", h.ck.Dir(), missing, E, b.role))
		}
		return errors.Join(errs...)
	}

	// Fused form, as transformers ≥ 5 saves it: with or without ".weight".
	name := prefix + "mlp.experts." + fused
	if _, ok := h.ck.Tensor(name); !ok {
		if _, ok := h.ck.Tensor(name + ".weight"); ok {
			name += ".weight"
		} else {
			return fmt.Errorf("checkpoint %s has no tensor %s (role %s), nor the fused %s", h.ck.Dir(), expertName(0), b.role, name)
		}
	}
	want := b.shape
	if half >= 0 {
		want = []int{E, 2 * rows, cols}
	}
	t, err := h.lookup(b.role, name, want)
	if err != nil {
		return err
	}
	b.names, b.srcs = []string{name}, []safetensors.Tensor{t}
	if half >= 0 {
		b.stride = 2 * rows * cols
		b.offset = half * rows * cols
	}
	return nil
}

// lookup fetches one HF tensor and checks its shape and dtype.
func (h *HF) lookup(role, name string, want []int) (safetensors.Tensor, error) {
	t, ok := h.ck.Tensor(name)
	if !ok {
		return t, fmt.Errorf("checkpoint %s has no tensor %s (role %s)", h.ck.Dir(), name, role)
	}
	if !slices.Equal(t.Shape, want) {
		return t, fmt.Errorf("checkpoint %s: tensor %s in %s has shape %v, expected %v from model.toml/config (role %s)", h.ck.Dir(), name, h.ck.FileOf(name), t.Shape, want, role)
	}
	if _, ok := sourceFormats[t.DType]; !ok {
		return t, fmt.Errorf("checkpoint %s: tensor %s in %s has dtype %s; only F32, F16 and BF16 weights load (role %s)", h.ck.Dir(), name, h.ck.FileOf(name), t.DType, role)
	}
	return t, nil
}

// withFile appends the file holding name to err, for errors raised after resolution.
func (h *HF) withFile(err error, name string) error {
	return fmt.Errorf("%w (in %s)", err, h.ck.FileOf(name))
}
