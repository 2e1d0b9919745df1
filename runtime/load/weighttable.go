package load

import (
	"fmt"
	"slices"
	"strings"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
)

// ClassWeights is what one class of weight roles runs as: per storage
// format, its bytes and how many of them are used in place from the file.
type ClassWeights struct {
	Class   string // a quant-plan class, or "small" (norms, gates, conv taps: f32)
	Formats []FormatWeights
}

// FormatWeights is one format of a class.
type FormatWeights struct {
	Format         string
	Bytes, InPlace int64
}

// WeightTable lists the device weights per class (embeddings, trunk,
// router, experts, head, small) and format, as the loaded model runs them.
func (l *Loaded) WeightTable() []ClassWeights {
	order := []string{models.ClassEmbeddings, models.ClassTrunk, models.ClassRouter, models.ClassExperts, models.ClassHead, "small"}
	by := map[string]map[string]*FormatWeights{}
	for _, s := range l.Config.Tensors() {
		if s.Host() {
			continue
		}
		rl, err := s.Layout(l.Config.Quant)
		if err != nil {
			continue
		}
		class := s.Class
		if s.Small {
			class = "small"
		}
		if by[class] == nil {
			by[class] = map[string]*FormatWeights{}
		}
		fw := by[class][rl.Format.Name]
		if fw == nil {
			fw = &FormatWeights{Format: rl.Format.Name}
			by[class][rl.Format.Name] = fw
		}
		n := int64(s.Rows()) * int64(rl.RowBytes())
		fw.Bytes += n
		if l.Model.UsedInPlace(s.Name) {
			fw.InPlace += n
		}
	}
	var out []ClassWeights
	for _, class := range order {
		m, ok := by[class]
		if !ok {
			continue
		}
		cw := ClassWeights{Class: class}
		for _, name := range quant.Names() {
			if fw, ok := m[name]; ok {
				cw.Formats = append(cw.Formats, *fw)
			}
		}
		out = append(out, cw)
	}
	return out
}

// FormatWeightTable renders a WeightTable as a short text table: one line
// per class and format, with the bytes in place and copied (routed experts
// are copied into the experts buffer, or streamed through the arena).
func FormatWeightTable(t []ClassWeights, streamed bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-10s %-7s %10s %10s\n", "class", "format", "MB", "in place")
	for _, cw := range t {
		for _, fw := range cw.Formats {
			where := fmt.Sprintf("%.0f%%", 100*float64(fw.InPlace)/float64(max(fw.Bytes, 1)))
			if cw.Class == models.ClassExperts {
				where = "copied"
				if streamed {
					where = "streamed"
				}
			}
			fmt.Fprintf(&b, "%-10s %-7s %10.3f %10s\n", cw.Class, fw.Format, float64(fw.Bytes)/1e6, where)
		}
	}
	return b.String()
}

// classFormats is the set of formats a class of t runs as.
func classFormats(t []ClassWeights, class string) []string {
	var out []string
	for _, cw := range t {
		if cw.Class == class {
			for _, fw := range cw.Formats {
				out = append(out, fw.Format)
			}
		}
	}
	slices.Sort(out)
	return out
}
