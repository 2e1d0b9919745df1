package planes_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-llm/strata/runtime/format/planes"
)

// originals are the SHA-256 of the vendored files as they were before
// encoding (the chat model's as its README states it): every FILE.planes in
// the tree must decode to them.
var originals = map[string]string{
	"models/tiny-go/model.safetensors":                 "a2be48e8e81fc8839a44da6a232440c51491a521c7764fa52afe84249059b783",
	"models/tiny-go/tokenizer.json":                    "c57ddd4dc61a870a80ee3099b2048ea1b7282c0fdfa663b7e07ae146b87e331a",
	"models/tiny-go/reference.safetensors":             "5ed9c8f3718d728da62d630e08dc4d6b41b01b45cebf23e1628a9b6a03c3b626",
	"models/tiny-go-chat/model.safetensors":            "c8411f5a19063f5b6bdd9293b36e90eef19c576b6d2f9bb19494458a91787dc0",
	"models/tiny-go-chat/reference.safetensors":        "a084e71c80693753dc7ee90189fee0bd31945977a2119f99397184264993d144",
	"testdata/oracles/q4-a/model.safetensors":          "24071efa4adbd4353552e1ce26021a12699d8e6c8632388a5a068d5871e6f51b",
	"testdata/oracles/tiny-a/model.safetensors":        "0f9134e0a49becf625c01e275224c2d32c9dcb8f5b18dad2677f77472c621b71",
	"testdata/oracles/tiny-k512/model.safetensors":     "02d58853f47fcf734a33a468a1acba370ce6e7b6f58f936d7925bdd616b74be9",
	"testdata/oracles/q4-a/reference.safetensors":      "cf90f58750b3cbbd5832b96a7a4d5229f2e4ad2b79a0452062e7c495bf740747",
	"testdata/oracles/tiny-a/reference.safetensors":    "1559aa906e789f51b3aca5227fe0a7331987af3056695adc3ead3f4ed8971884",
	"testdata/oracles/tiny-k512/reference.safetensors": "8d8ff8424c67ee63913473e7779042f9c4dc13659fa532a6aefb40e33409b5f1",
}

const root = "../../.."

func TestVendoredFilesDecodeToOriginals(t *testing.T) {
	found, _ := filepath.Glob(filepath.Join(root, "models", "*", "*"+planes.Ext))
	more, _ := filepath.Glob(filepath.Join(root, "testdata", "oracles", "*", "*"+planes.Ext))
	found = append(found, more...)
	if len(found) != len(originals) {
		t.Errorf("%d %s files in the tree, %d originals listed", len(found), planes.Ext, len(originals))
	}
	for _, f := range found {
		rel, _ := filepath.Rel(root, f)
		rel = filepath.ToSlash(rel[:len(rel)-len(planes.Ext)])
		want, ok := originals[rel]
		if !ok {
			t.Errorf("%s%s: no original SHA-256 listed", rel, planes.Ext)
			continue
		}
		data, err := planes.ReadOSFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != want {
			t.Errorf("%s decodes to SHA-256 %s, want %s", rel, got, want)
		}
		if _, err := os.Stat(filepath.Join(root, rel)); err == nil {
			t.Errorf("%s is in the tree beside %s%s", rel, rel, planes.Ext)
		}
	}
}
