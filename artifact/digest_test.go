package artifact

import (
	"testing"

	"github.com/strata-llm/strata/internal/srcdigest"
)

// TestGeneratorDigestCurrent: the digest artifact keys carry is the one of
// the generator's source as it is, so a change to gen, graph or the
// templates changes every key (and the checked-in generated/ with them).
func TestGeneratorDigestCurrent(t *testing.T) {
	got, err := srcdigest.Of("..")
	if err != nil {
		t.Fatal(err)
	}
	if got != generatorDigest {
		t.Fatalf("generator_digest.go has %s, the generator's source hashes to %s: run go generate ./artifact, then go generate ./... for generated/", generatorDigest, got)
	}
}
