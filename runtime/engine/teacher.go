package engine

import "fmt"

// TeacherForced feeds tokens from a fresh session in windows of up to rows
// rows and returns every position's next-token logits and, when the model
// has an MTP head, the head's teacher-forced logits: mtp[t] (t = 0 … len−2)
// are the head's logits for tokens[t+2], from the trunk's state at t and the
// true tokens[t+1] — the convention of tiny-go's reference. The trunk
// windows must compute every row's logits (graphs built with all logits).
func (m *Model) TeacherForced(tokens []int, rows int) (trunk, mtp [][]float32, err error) {
	return m.teacherForced(tokens, rows, m.HasMTP())
}

// TrunkForced is TeacherForced without the MTP head.
func (m *Model) TrunkForced(tokens []int, rows int) ([][]float32, error) {
	trunk, _, err := m.teacherForced(tokens, rows, false)
	return trunk, err
}

func (m *Model) teacherForced(tokens []int, rows int, withMTP bool) (trunk, mtp [][]float32, err error) {
	if rows < 1 {
		return nil, nil, fmt.Errorf("teacher forcing: windows of %d rows, want ≥ 1", rows)
	}
	s := m.NewSession()
	for a := 0; a < len(tokens); a += rows {
		b := min(a+rows, len(tokens))
		got, err := s.Window(tokens[a:b])
		if err != nil {
			return nil, nil, err
		}
		if len(got) != b-a {
			return nil, nil, fmt.Errorf("teacher forcing: a %d-row window computed %d logit rows; build the graphs with every row's logits", b-a, len(got))
		}
		trunk = append(trunk, got...)
		if !withMTP || a+1 >= len(tokens) {
			continue
		}
		// Row t of the head pairs the trunk's row t with the true next token.
		d, err := s.MTPWindow(tokens[a+1:min(b+1, len(tokens))], a)
		if err != nil {
			return nil, nil, fmt.Errorf("MTP head: %w", err)
		}
		mtp = append(mtp, d...)
	}
	return trunk, mtp, nil
}
