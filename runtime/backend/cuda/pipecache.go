package cuda

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/strata-llm/strata/internal/outfile"
)

// pipelineCache keeps the CUBINs NVRTC makes on disk, one file per pipeline
// named by a hash of everything the binary depends on (the pipeline's
// source with its function constants, the headers it includes, the compile
// options with the GPU architecture, and NVRTC's version), as Metal's
// binary archives keep compiled pipelines: a second start of the same model
// compiles nothing. A file holds the SHA-256 of the CUBIN then the CUBIN, so
// a torn or damaged file reads as a miss and is compiled again.
type pipelineCache struct {
	dir string // "" when off
}

// PipelineCacheOff, as Options.PipelineCache, compiles every pipeline at
// every start.
const PipelineCacheOff = "off"

// openPipelineCache is the cache Options.PipelineCache names: a folder,
// PipelineCacheOff, or "" for strata/cuda-pipelines in the user cache
// folder (os.UserCacheDir; off where there is none).
func openPipelineCache(dir string) pipelineCache {
	switch dir {
	case PipelineCacheOff:
		return pipelineCache{}
	case "":
		base, err := os.UserCacheDir()
		if err != nil {
			return pipelineCache{}
		}
		dir = filepath.Join(base, "strata", "cuda-pipelines")
	}
	return pipelineCache{dir: dir}
}

// cubinKey hashes what a pipeline's CUBIN is made from. Every part is
// length-prefixed, so no two different inputs share a key.
func cubinKey(unit []byte, headers map[string][]byte, opts []string, nvrtcMajor, nvrtcMinor int) string {
	h := sha256.New()
	part := func(b []byte) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	part([]byte(fmt.Sprintf("nvrtc %d.%d", nvrtcMajor, nvrtcMinor)))
	for _, o := range opts {
		part([]byte(o))
	}
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		part([]byte(k))
		part(headers[k])
	}
	part(unit)
	return hex.EncodeToString(h.Sum(nil))
}

func (c pipelineCache) path(key string) string { return filepath.Join(c.dir, key+".cubin") }

// get returns the cached CUBIN of key, or false (a missing, unreadable or
// damaged file is a miss).
func (c pipelineCache) get(key string) ([]byte, bool) {
	if c.dir == "" {
		return nil, false
	}
	data, err := os.ReadFile(c.path(key))
	if err != nil || len(data) <= sha256.Size {
		return nil, false
	}
	sum, bin := data[:sha256.Size], data[sha256.Size:]
	if got := sha256.Sum256(bin); !bytes.Equal(got[:], sum) {
		return nil, false
	}
	return bin, true
}

// put stores bin as key's CUBIN, atomically (temporary file and rename), so
// two strata starting together never see half a file.
func (c pipelineCache) put(key string, bin []byte) error {
	if c.dir == "" {
		return nil
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return fmt.Errorf("cuda: pipeline cache: %w", err)
	}
	sum := sha256.Sum256(bin)
	if err := outfile.WriteFile(c.path(key), append(sum[:], bin...)); err != nil {
		return fmt.Errorf("cuda: pipeline cache: %w", err)
	}
	return nil
}

// drop removes key's file, after the driver refused the binary it held.
func (c pipelineCache) drop(key string) {
	if c.dir != "" {
		os.Remove(c.path(key)) // a file already gone is as good
	}
}
