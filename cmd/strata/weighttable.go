package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
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

// printBufferLine writes what the model's buffers take, by kind, largest
// first, under --stats: the memory a run holds besides mapped files.
func printBufferLine(w io.Writer, l *load.Loaded) {
	by := l.Model.BufferBytes()
	kinds := make([]string, 0, len(by))
	var total int64
	for k, v := range by {
		kinds = append(kinds, k)
		total += v
	}
	slices.SortFunc(kinds, func(a, b string) int {
		return cmp.Or(cmp.Compare(by[b], by[a]), strings.Compare(a, b)) // larger first
	})
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %.2f GB", k, float64(by[k])/1e9)
	}
	fmt.Fprintf(w, "strata: buffers: %.2f GB: %s\n", float64(total)/1e9, strings.Join(parts, ", "))
}
