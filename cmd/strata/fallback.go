package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/strata-llm/strata/runtime/tools/convert"
)

// warnFallbacks says loudly which tensors were written in another format
// than the plan asked for (a plan never falls back silently).
func warnFallbacks(stderr io.Writer, rep *convert.Report) {
	if n := len(rep.Padded); n > 0 {
		names := rep.Padded
		if n > 4 {
			names = append(names[:4:4], fmt.Sprintf("and %d more", n-4))
		}
		fmt.Fprintf(stderr, "warning: rows=%s zero-padded the rows of %d tensors to whole blocks: %s. A GGUF's rows must be whole blocks of their type, so this file is strata's only (llama.cpp refuses it); rows=fallback, the default, writes llama-quantize's formats instead\n",
			rep.Config.Quant.Rows, n, strings.Join(names, ", "))
	}
	if len(rep.Fallbacks) == 0 {
		return
	}
	fmt.Fprintf(stderr, "warning: %d tensors are not in the planned format (their rows are not whole blocks of it: llama.cpp's fallback formats, as llama-quantize writes them):\n", len(rep.Fallbacks))
	for _, line := range convert.Fallbacks(rep.Fallbacks) {
		fmt.Fprintf(stderr, "  %s\n", line)
	}
}

// planSummary is the plan written, with the formats of classes whose
// tensors fell back to several formats (the plan cannot name those).
func planSummary(rep *convert.Report) string {
	s := convert.String(rep.Config.Quant)
	mixed := map[string]map[string]bool{}
	var order []string
	for _, f := range rep.Fallbacks {
		if f.Planned == f.Written {
			continue
		}
		if mixed[f.Planned] == nil {
			mixed[f.Planned] = map[string]bool{}
			order = append(order, f.Planned)
		}
		mixed[f.Planned][f.Written] = true
	}
	for _, planned := range order {
		if !strings.Contains(s, "="+planned) {
			continue // the plan was rewritten to the format written
		}
		var ws []string
		for w := range mixed[planned] {
			ws = append(ws, w)
		}
		sort.Strings(ws)
		s += fmt.Sprintf(" (%s written as %s where rows are not whole blocks)", planned, strings.Join(ws, ", "))
	}
	return s
}
