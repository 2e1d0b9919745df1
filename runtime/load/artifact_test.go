package load

import "github.com/strata-llm/strata/internal/gentest"

// The tests open models under configs no checked-in artifact is for (their
// own prefill rows, contexts, MoCE knobs, GGUF formats): Generate makes
// those in process, through the serialization path.
func init() { Generate = gentest.Generate }
