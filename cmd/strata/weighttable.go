package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/strata-llm/strata/runtime/load"
)

// printWeightTable writes the loaded model's weights per class and format
// (bytes, share used in place from the mapped file) under --stats.
func printWeightTable(w io.Writer, l *load.Loaded) {
	t := load.FormatWeightTable(l.WeightTable(), l.ArenaExperts > 0)
	for _, line := range strings.Split(strings.TrimRight(t, "\n"), "\n") {
		fmt.Fprintf(w, "strata: weights: %s\n", line)
	}
}
