package quant

import "fmt"

func init() {
	registry["iq2_xs"].EncodeWeighted = encodeIQ2XSWeighted
	registry["iq4_nl"].EncodeWeighted = encodeIQ4NLWeighted
	registry["iq4_xs"].EncodeWeighted = encodeIQ4XSWeighted
}

// EncodeImportance quantizes rows of len(qw) values of src into dst with the
// importance weights qw (an imatrix row: the mean x² of each input column),
// or as Encode when qw is nil. It refuses a format whose quantizer takes no
// weights, and lengths that are not whole rows of whole blocks.
func (f *Format) EncodeImportance(src, qw []float32, dst []byte) error {
	if qw == nil {
		if f.Encode == nil {
			return fmt.Errorf("%s has no quantizer", f.Name)
		}
		f.Encode(src, dst)
		return nil
	}
	if f.EncodeWeighted == nil {
		return fmt.Errorf("the %s quantizer takes no importance matrix", f.Name)
	}
	if len(qw)%f.BlockElems != 0 || len(qw) == 0 || len(src)%len(qw) != 0 {
		return fmt.Errorf("%s: %d values in rows of %d weights (rows must be whole %d-value blocks)", f.Name, len(src), len(qw), f.BlockElems)
	}
	if len(dst) < f.Bytes(len(src)) {
		return fmt.Errorf("%s: %d bytes for %d values, need %d", f.Name, len(dst), len(src), f.Bytes(len(src)))
	}
	f.EncodeWeighted(src, qw, dst)
	return nil
}
