package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/strata-llm/strata/internal/outfile"
	"github.com/strata-llm/strata/runtime/format/planes"
)

func init() {
	commands["planes"] = command{"encode or decode FILE.planes, the vendored checkpoints' lossless codec", planesCmd}
}

const planesAbout = `
Writes FILE.planes for each FILE (the codec of the checkpoints and references
vendored in the tree, docs/planes.md): float tensors split into byte planes,
each plane deflated or stored, and with --base a bf16 checkpoint coded as the
difference from BASE, the checkpoint it was fine-tuned from (BASE may itself be
BASE.planes). Every reader of FILE reads FILE.planes when FILE is absent. The
encoding is decoded and compared with FILE before it is written; --rm then
removes FILE.

With -d it decodes FILE.planes back to FILE instead, checking the SHA-256 the
header records.`

func planesCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("planes", "[--base BASE] [--rm] FILE... | -d FILE.planes...", planesAbout, stderr)
	base := fs.String("base", "", "bf16 safetensors `file` to code the bf16 tensors against (a fine-tune's original)")
	rm := fs.Bool("rm", false, "remove each FILE once FILE.planes is written")
	decode := fs.Bool("d", false, "decode FILE.planes to FILE instead")
	pos, err := parseFlagsAnd(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("expected at least one file")
	}
	if *decode {
		if *base != "" || *rm {
			return usagef("-d takes no --base or --rm")
		}
		for _, p := range pos {
			if filepath.Ext(p) != planes.Ext {
				return usagef("-d: %s does not end in %s", p, planes.Ext)
			}
			out := p[:len(p)-len(planes.Ext)]
			data, err := planes.ReadOSFile(out)
			if err != nil {
				return err
			}
			if err := outfile.WriteFile(out, data); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s: %d bytes\n", out, len(data))
		}
		return nil
	}
	var opt planes.EncodeOptions
	for _, p := range pos {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if *base != "" {
			if opt.Base, err = planes.ReadOSFile(*base); err != nil {
				return fmt.Errorf("--base: %w", err)
			}
			rel, err := filepath.Rel(filepath.Dir(p), *base)
			if err != nil {
				return fmt.Errorf("--base: %w", err)
			}
			opt.BaseName = filepath.ToSlash(rel)
		}
		enc, err := planes.Encode(data, opt)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if err := outfile.WriteFile(p+planes.Ext, enc); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s%s: %d -> %d bytes (%.1f%%)\n", p, planes.Ext, len(data), len(enc), 100*float64(len(enc))/float64(len(data)))
		if *rm {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	return nil
}
