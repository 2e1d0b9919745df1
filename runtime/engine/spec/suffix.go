// Package spec holds the pieces of speculative decoding that do not touch the
// model: the suffix (prompt-lookup) drafter, the online spec gate that picks
// how many drafts a window carries, and speculative sampling. The engine runs
// the windows; nothing here can change which tokens come out.
package spec

// Drafter proposes up to k tokens to follow hist, with its own estimate of
// each one's acceptance (negative: no estimate).
type Drafter interface {
	Draft(hist []int, k int) (drafts []int, probs []float64)
}

// Suffix drafts by prompt lookup: it finds the longest earlier occurrence of
// the sequence's last MinMatch…MaxMatch tokens and proposes what followed it.
type Suffix struct {
	MinMatch int // shortest suffix worth matching (2)
	MaxMatch int // longest suffix tried (4)
}

// DefaultSuffix matches suffixes of 2 to 4 tokens.
var DefaultSuffix = Suffix{MinMatch: 2, MaxMatch: 4}

// Draft proposes up to k tokens to follow hist, and for each the fraction of
// the earlier occurrences of the matched suffix whose continuation agrees
// with the drafts up to it — the drafter's own estimate that it is accepted.
func (s Suffix) Draft(hist []int, k int) (drafts []int, probs []float64) {
	n := len(hist)
	if k <= 0 {
		return nil, nil
	}
	for m := min(s.MaxMatch, n-1); m >= s.MinMatch; m-- {
		suffix := hist[n-m:]
		var starts []int // where continuations of earlier occurrences start
		for i := n - m - 1; i >= 0; i-- {
			if equal(hist[i:i+m], suffix) {
				starts = append(starts, i+m)
			}
		}
		if len(starts) == 0 {
			continue
		}
		// Follow the most recent occurrence.
		best := starts[0]
		for j := 0; j < k && best+j < n; j++ {
			drafts = append(drafts, hist[best+j])
		}
		agree := len(starts)
		alive := make([]bool, len(starts))
		for i := range alive {
			alive[i] = true
		}
		for j := range drafts {
			for o, st := range starts {
				if alive[o] && (st+j >= n || hist[st+j] != drafts[j]) {
					alive[o] = false
					agree--
				}
			}
			probs = append(probs, float64(agree)/float64(len(starts)))
		}
		return drafts, probs
	}
	return nil, nil
}

func equal(a, b []int) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
