package quant

// The AVX2 quantizer of whole activation blocks (act8_amd64.s), where the
// integer kernels run.
func init() {
	if haveAVX2 {
		quantize32 = quantizeAct8AVX2
		quantize32Max = quantizeAct8MaxAVX2
		absMax256 = absMax256AVX2
	}
}
