package convert

import (
	"fmt"
	"sort"
	"strings"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
)

// Fallback is a tensor written in another format than its class's plan asks
// for: its rows are not whole blocks of the planned format, and the row
// policy chose the fallback format (or padding kept the format).
type Fallback struct {
	Role             string
	Planned, Written string
	RowLen           int
}

// Fallbacks groups fallbacks for a warning: "experts=iq2_xs → iq4_nl:
// layers.0.moe.experts.gate, … (rows of 64)".
func Fallbacks(fs []Fallback) []string {
	type key struct{ planned, written string }
	byKey := map[key][]string{}
	rows := map[key]map[int]bool{}
	for _, f := range fs {
		k := key{f.Planned, f.Written}
		byKey[k] = append(byKey[k], f.Role)
		if rows[k] == nil {
			rows[k] = map[int]bool{}
		}
		rows[k][f.RowLen] = true
	}
	var out []string
	for k, roles := range byKey {
		var lens []string
		for n := range rows[k] {
			lens = append(lens, fmt.Sprint(n))
		}
		sort.Strings(lens)
		shown := roles
		if len(shown) > 4 {
			shown = append(append([]string{}, roles[:4]...), fmt.Sprintf("and %d more", len(roles)-4))
		}
		out = append(out, fmt.Sprintf("%s → %s for %d tensors (rows of %s, not whole %s blocks): %s",
			k.planned, k.written, len(roles), strings.Join(lens, ", "), k.planned, strings.Join(shown, ", ")))
	}
	sort.Strings(out)
	return out
}

// resolvePlan finds the tensors a plan cannot store as asked, and rewrites
// each class whose tensors all went to one other format as that format, when
// the rewritten plan lays every tensor out exactly as the original (so the
// embedded config says what was written and still loads the same bytes).
func resolvePlan(cfg *models.Config) ([]Fallback, error) {
	specs := cfg.Tensors()
	layouts := func(q models.QuantPlan) ([]quant.RowLayout, error) {
		out := make([]quant.RowLayout, len(specs))
		for i, s := range specs {
			ls := s
			if s.Host() {
				ls.Class = models.ClassEmbeddings
			}
			rl, err := ls.Layout(q)
			if err != nil {
				return nil, err
			}
			out[i] = rl
		}
		return out, nil
	}
	before, err := layouts(cfg.Quant)
	if err != nil {
		return nil, err
	}
	var fbs []Fallback
	written := map[string]map[string]bool{} // class → formats written (non-small tensors)
	for i, s := range specs {
		if s.Small {
			continue
		}
		class := s.Class
		if s.Host() {
			class = models.ClassEmbeddings
		}
		planned := cfg.Quant.ForClass(class)
		got := before[i].Format.Name
		if written[class] == nil {
			written[class] = map[string]bool{}
		}
		written[class][got] = true
		if got != planned {
			fbs = append(fbs, Fallback{Role: s.Name, Planned: planned, Written: got, RowLen: before[i].Len})
		}
	}
	if len(fbs) == 0 {
		return nil, nil
	}
	q := cfg.Quant
	for class, formats := range written {
		if len(formats) != 1 {
			continue
		}
		for f := range formats {
			if f == q.ForClass(class) {
				continue
			}
			trial := q
			setClass(&trial, class, f)
			after, err := layouts(trial)
			if err != nil || !sameLayouts(before, after) {
				continue
			}
			q = trial
		}
	}
	cfg.Quant = q
	return fbs, nil
}

func sameLayouts(a, b []quant.RowLayout) bool {
	for i := range a {
		if a[i].Format.Name != b[i].Format.Name || a[i].Len != b[i].Len || a[i].Stored != b[i].Stored {
			return false
		}
	}
	return true
}

func setClass(q *models.QuantPlan, class, format string) {
	switch class {
	case models.ClassExperts:
		q.Experts = format
	case models.ClassEmbeddings:
		q.Embeddings = format
	case models.ClassHead:
		q.Head = format
	case models.ClassRouter:
		q.Router = format
	default:
		q.Trunk = format
	}
}

// fallbacksOf lists the fallbacks of the plan c asked for (resolvePlan has
// already rewritten cfg's).
func fallbacksOf(cfg, c *models.Config) []Fallback {
	asked := *cfg
	asked.Quant = c.Quant
	fbs, _ := resolvePlan(&asked)
	return fbs
}
