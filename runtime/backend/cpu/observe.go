package cpu

import "sync/atomic"

// Observer sees the activations that enter the weight matrices, as
// llama-imatrix collects them: for every matmul whose left operand is a
// weight tensor of the graph, the rows of x it multiplies. It is how
// `strata imatrix` gathers Σx² per input column without a second forward
// path; with none set the kernels pay one atomic load per dispatch.
type Observer interface {
	// Activations reports rows of cols values (x, row-major, len a multiple
	// of cols) entering matrix mat of the weight tensor called tensor (the
	// graph's name), which stacks nmat matrices: 1 for a plain weight, the
	// experts for a routed-expert tensor (mat is the expert). It is called
	// from the kernels' goroutines, possibly concurrently, and must not keep x.
	Activations(tensor string, mat, nmat, cols int, x []float32)
}

var observer atomic.Pointer[Observer]

// SetObserver installs o (nil: none) for every program of this process and
// returns the one it replaces.
func SetObserver(o Observer) Observer {
	var prev *Observer
	if o == nil {
		prev = observer.Swap(nil)
	} else {
		prev = observer.Swap(&o)
	}
	if prev == nil {
		return nil
	}
	return *prev
}

func currentObserver() Observer {
	if p := observer.Load(); p != nil {
		return *p
	}
	return nil
}

// tensorName is the name of the weight tensor that starts at byte off of
// binding name, or "" when there is none (an activation operand).
func (a *args) tensorName(name string, off int) string {
	b, ok := a.d.Arg(name)
	if !ok {
		return ""
	}
	t, ok := a.tensors[tensorKey{b.Buffer, b.Offset + int64(off)}]
	if !ok {
		return ""
	}
	return t.Name
}

// observeGroup reports the rows of x (width cols) that the (row, choice)
// pairs tjs routed to expert e bring to each of names.
func observeGroup(o Observer, names []string, e, experts, cols, K int, x []float32, tjs []int, byPair bool) {
	buf := make([]float32, 0, len(tjs)*cols)
	for _, tj := range tjs {
		r := tj / K
		if byPair {
			r = tj
		}
		buf = append(buf, x[r*cols:(r+1)*cols]...)
	}
	for _, n := range names {
		if n != "" {
			o.Activations(n, e, experts, cols, buf)
		}
	}
}
