package pack

// PReader is the positioned-read interface the Reader's descriptors share.
type PReader = preader

// WrapDirect wraps r's direct descriptor; where the filesystem gave none, it
// installs w of the buffered one as a stand-in, so the direct path's logic
// is tested on any filesystem.
func WrapDirect(r *Reader, w func(PReader) PReader) {
	if r.direct.f == nil {
		r.direct = &direct{f: w(r.file), mode: "stand-in"}
		return
	}
	r.direct.f = w(r.direct.f)
}

// WrapBuffered wraps r's buffered descriptor.
func WrapBuffered(r *Reader, w func(PReader) PReader) { r.file = w(r.file) }

// DirectFile is r's direct descriptor (nil when there is none).
func DirectFile(r *Reader) PReader { return r.direct.f }

// OpenDirectFile is the hook that opens the direct descriptor.
var OpenDirectFile = &openDirectFile

// DirectAlign is the alignment direct reads need.
const DirectAlign = directAlign
