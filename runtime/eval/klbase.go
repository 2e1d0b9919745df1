package eval

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/strata-llm/strata/runtime/format/safetensors"
)

// baseTensor is the base file's one tensor: f32 [rows, vocab], the
// log-probabilities of every scored position in order.
const baseTensor = "logprobs"

// KLBase is a base model's log-probabilities to compare a run with: a
// safetensors file read when it exists, or written from this run's rows
// when it does not. The file's "windows" metadata is the key of the text and
// windows it scored (WindowsKey); a run with another key is refused.
type KLBase struct {
	path   string
	key    string
	vocab  int
	base   *safetensors.File // the file compared with; nil when saving
	table  safetensors.Tensor
	saved  []byte // the rows to save, f32
	row    int    // rows scored so far
	closed bool
}

// OpenKLBase opens the base file at path when it exists, checking it holds
// logprobs f32 [rows, vocab] for the same key, or prepares to save one there.
func OpenKLBase(path, key string, vocab int) (*KLBase, error) {
	kl := &KLBase{path: path, key: key, vocab: vocab}
	switch _, err := os.Stat(path); {
	case errors.Is(err, os.ErrNotExist):
		return kl, nil
	case err != nil:
		return nil, err
	}
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	t, ok := f.Tensor(baseTensor)
	if !ok || t.DType != "F32" || len(t.Shape) != 2 || t.Shape[1] != vocab {
		f.Close()
		return nil, fmt.Errorf("%s: expected tensor %s F32 [rows, %d] written by strata perplexity", path, baseTensor, vocab)
	}
	if got := f.Metadata()["windows"]; got != key {
		f.Close()
		return nil, fmt.Errorf("%s scored other text or windows (%s), not this run's (%s)", path, got, key)
	}
	kl.base, kl.table = f, t
	return kl, nil
}

// Path is the base file's path.
func (kl *KLBase) Path() string { return kl.path }

// Saving reports whether the base is being made by this run (the file did
// not exist).
func (kl *KLBase) Saving() bool { return kl.base == nil }

// Rows is the number of positions added so far.
func (kl *KLBase) Rows() int { return kl.row }

// Add compares one scored position's log-probabilities lp with the base's
// next row, into sc, or keeps them to save.
func (kl *KLBase) Add(sc *Scores, lp []float32) error {
	if kl.base == nil {
		for _, v := range lp {
			kl.saved = binary.LittleEndian.AppendUint32(kl.saved, math.Float32bits(v))
		}
		kl.row++
		return nil
	}
	if rows := kl.table.Shape[0]; kl.row >= rows {
		return fmt.Errorf("KL base %s has %d rows; this run scores more", kl.path, rows)
	}
	if len(lp) != kl.vocab {
		return fmt.Errorf("KL base %s: a position of %d log-probabilities, the base has %d", kl.path, len(lp), kl.vocab)
	}
	b := make([]float32, kl.vocab)
	off := 4 * kl.row * kl.vocab
	for i := range b {
		b[i] = math.Float32frombits(binary.LittleEndian.Uint32(kl.table.Data[off+4*i:]))
	}
	sc.AddBase(lp, b)
	kl.row++
	return nil
}

// Save writes the rows added when the base is being made, naming model in
// the file's metadata; it does nothing when the base was read.
func (kl *KLBase) Save(model string) error {
	if kl.base != nil {
		return nil
	}
	t := safetensors.Tensor{Name: baseTensor, DType: "F32", Shape: []int{kl.row, kl.vocab}, Data: kl.saved}
	return safetensors.WriteFile(kl.path, []safetensors.Tensor{t}, map[string]string{"windows": kl.key, "model": model})
}

// Close releases the base file read (a nil base: nothing).
func (kl *KLBase) Close() error {
	if kl == nil || kl.base == nil || kl.closed {
		return nil
	}
	kl.closed = true
	return kl.base.Close()
}

// WindowsKey identifies what a base file scored: the tokens (their count
// and a hash), the windows' length and starts, and the first position
// scored.
func WindowsKey(tokens, starts []int, ctx, first int) string {
	h := sha256.New()
	for _, t := range tokens {
		h.Write(binary.LittleEndian.AppendUint32(nil, uint32(t)))
	}
	var s []string
	for _, v := range starts {
		s = append(s, strconv.Itoa(v))
	}
	sum := h.Sum(nil)
	h.Reset()
	h.Write([]byte(strings.Join(s, ",")))
	return fmt.Sprintf("tokens=%d sha256=%s ctx=%d first=%d starts=%s", len(tokens), hex.EncodeToString(sum[:8]), ctx, first, hex.EncodeToString(h.Sum(nil)[:8]))
}
