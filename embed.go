//go:build !strata_default_on_disk

package strata

import (
	"embed"
	"io/fs"
)

// embedded holds the default model's checkpoint, under DefaultModelDir:
// tiny-go (models/tiny-go/README.md), an 11.9M-parameter
// Qwen3.8-Flash-Next-architecture model trained on Go source and fortunes,
// with its MTP head and tokenizer; and under ChatModelDir the checkpoint of
// tiny-go-chat, tiny-go fine-tuned to chat and call tools. The checkpoints
// and tiny-go's tokenizer.json are FILE.planes (runtime/format/planes), the
// chat model's checkpoint a delta against tiny-go's.
//
//go:embed models/tiny-go/config.json models/tiny-go/generation_config.json models/tiny-go/model.safetensors.planes models/tiny-go/tokenizer.json.planes models/tiny-go/tokenizer_config.json
//go:embed models/tiny-go-chat/model.safetensors.planes
var embedded embed.FS

// DefaultModel holds the default model's files under DefaultModelDir.
var DefaultModel fs.FS = embedded
