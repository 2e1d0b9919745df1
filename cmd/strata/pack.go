package main

import (
	"fmt"
	"io"

	"github.com/strata-llm/strata/internal/outfile"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/format/pack"
	"github.com/strata-llm/strata/runtime/weights"
)

func init() {
	commands["pack"] = command{"lay a GGUF's routed experts out for SSD streaming (FILE.experts)", packCmd}
}

const packAbout = `
Writes FILE.experts beside a GGUF model: every routed expert's gate, up and
down data contiguous (one read fetches an expert), each expert on a 16 KiB
boundary, with an index (layer, expert -> offset, length, CRC-32C) and a
header that ties the pack to FILE: its size, a hash of its metadata and
tensor table, and a hash of sampled expert bytes. "strata run --gguf FILE"
then reads the experts through the pack, and refuses a pack that belongs to
another (or an older) FILE.

--verify checks an existing pack completely instead: every expert's checksum,
and every expert's bytes against FILE.`

func packCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("pack", "[--verify] [-o OUT] FILE.gguf", packAbout, stderr)
	out := fs.String("o", "", "pack `file` to write or verify (default: FILE.gguf.experts)")
	verify := fs.Bool("verify", false, "check the existing pack against FILE instead of writing one")
	pos, err := parseFlagsAnd(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("expected one GGUF file, got %d arguments", len(pos))
	}
	path := pos[0]
	if *out == "" {
		*out = pack.Path(path)
	}
	if !*verify {
		if err := outfile.NotInput("-o", *out, path); err != nil {
			return err
		}
	}
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if *verify {
		r, err := pack.Open(*out, f)
		if err != nil {
			return err
		}
		defer r.Close()
		bar := newProgress(stderr, "verify")
		err = r.Check(f, bar.update)
		bar.finish()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s matches %s: %d blocks × %d experts\n", *out, path, len(r.Blocks()), r.Experts())
		return nil
	}
	layers, err := weights.ExpertLayers(f)
	if err != nil {
		return err
	}
	bar := newProgress(stderr, "pack")
	err = pack.Write(*out, f, layers, bar.update)
	bar.finish()
	if err != nil {
		return err
	}
	r, err := pack.Open(*out, f)
	if err != nil {
		return fmt.Errorf("reading back the pack just written: %w", err)
	}
	defer r.Close()
	e, _ := r.Entry(layers[0].Block, 0)
	fmt.Fprintf(stdout, "wrote %s: %d blocks × %d experts, %d bytes per expert (%d with page padding)\n", *out, len(layers), r.Experts(), e.Length, r.SlotBytes())
	return nil
}
