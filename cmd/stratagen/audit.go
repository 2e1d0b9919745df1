package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/strata-llm/strata/graph"
)

// Audit files of a model: one pair covering every graph generate writes, in
// the same order, so a change to any window shows up as one diff.
const (
	auditText = "audit.txt"
	auditJSON = "audit.json"
)

// auditFiles renders the audit of every graph: audit.txt (one section per
// graph) and audit.json (a list of the objects `strata graph audit --json`
// prints, one compact object a line: a window's change is a one-line diff,
// and the tree carries a quarter fewer bytes than indented JSON).
func auditFiles(graphs []*graph.Graph) (map[string][]byte, error) {
	var text bytes.Buffer
	audits := make([]*graph.Audit, 0, len(graphs))
	for i, g := range graphs {
		a := graph.NewAudit(g)
		audits = append(audits, a)
		if i > 0 {
			text.WriteString("\n")
		}
		if err := a.WriteText(&text); err != nil {
			return nil, err
		}
	}
	j := []byte("[\n")
	for i, a := range audits {
		line, err := json.Marshal(a)
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", auditJSON, err)
		}
		j = append(j, line...)
		if i < len(audits)-1 {
			j = append(j, ',')
		}
		j = append(j, '\n')
	}
	return map[string][]byte{auditText: text.Bytes(), auditJSON: append(j, "]\n"...)}, nil
}
