package convert

import (
	"fmt"
	"strings"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
)

// PlanKeys are the keys ParsePlan accepts, as the --quant help lists them.
const PlanKeys = "trunk, router, experts, embed (or embeddings), head, all, rows"

// ParsePlan applies a plan such as "experts=iq2_xs,trunk=q8_0,embed=q8_0,head=q6_k"
// to base: each item sets the format of one tensor class, "all" sets every
// class, and "rows" the row policy (fallback; pad and smallest are refused by Write). Classes not
// named keep base's format. Errors name the item.
func ParsePlan(base models.QuantPlan, plan string) (models.QuantPlan, error) {
	q := base
	if strings.TrimSpace(plan) == "" {
		return q, nil
	}
	for i, item := range strings.Split(plan, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(item), "=")
		key, val = strings.ToLower(strings.TrimSpace(key)), strings.TrimSpace(val)
		if !ok || key == "" || val == "" {
			return base, fmt.Errorf("item %d %q: expected class=format (classes: %s)", i+1, item, PlanKeys)
		}
		if key == "rows" {
			p, err := quant.ParseRowPolicy(val)
			if err != nil {
				return base, fmt.Errorf("item %d %q: %w", i+1, item, err)
			}
			q.Rows = p.String()
			continue
		}
		f, err := quant.Lookup(val)
		if err != nil {
			return base, fmt.Errorf("item %d %q: %w", i+1, item, err)
		}
		if f.Encode == nil {
			return base, fmt.Errorf("item %d %q: strata decodes %s but cannot quantize to it: it has no quantizer for it (a file that holds it, e.g. llama-quantize's, runs as it is); plan one of %s", i+1, item, f.Name, strings.Join(quant.Quantizable(), ", "))
		}
		switch key {
		case "trunk":
			q.Trunk = f.Name
		case "experts":
			q.Experts = f.Name
		case "embed", "embeddings":
			q.Embeddings = f.Name
		case "head":
			q.Head = f.Name
		case "router":
			q.Router = f.Name
		case "all":
			q.Trunk, q.Experts, q.Embeddings, q.Head = f.Name, f.Name, f.Name, f.Name // the router: named, or DefaultRouter
		default:
			return base, fmt.Errorf("item %d %q: unknown class %q (expected one of %s)", i+1, item, key, PlanKeys)
		}
	}
	if q.Router == "" {
		q.Router = DefaultRouter(q.Trunk)
	}
	return q, nil
}

// DefaultRouter is the router's format when the plan does not name one: f16
// under a quantized trunk, as llama.cpp's mixes keep ffn_gate_inp (the expert
// choice is sensitive to it), else "" (the trunk's float format).
func DefaultRouter(trunk string) string {
	if f, err := quant.Lookup(trunk); err == nil && f.BlockElems > 1 {
		return "f16"
	}
	return ""
}

// String renders a plan in ParsePlan's syntax.
func String(q models.QuantPlan) string {
	s := fmt.Sprintf("trunk=%s,experts=%s,embed=%s,head=%s", q.Trunk, q.Experts, q.Embeddings, q.Head)
	if q.Router != "" {
		s += ",router=" + q.Router
	}
	if q.Rows != "" {
		s += ",rows=" + q.Rows
	}
	return s
}
