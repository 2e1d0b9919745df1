package tokenizer

import "unicode/utf8"

// GPT-2's byte-level alphabet: every byte is shown as one printable rune so a
// vocabulary of strings can hold arbitrary bytes. Printable Latin-1 bytes stand
// for themselves; the other 68 bytes take the runes from U+0100 on, in order.
var (
	byteToRune [256]rune
	runeToByte = map[rune]byte{}
)

func init() {
	next := rune(256)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = next
			next++
		}
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// byteLevelEncode shows raw bytes in the byte-level alphabet.
func byteLevelEncode(b []byte) string {
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = utf8.AppendRune(out, byteToRune[c])
	}
	return string(out)
}

// byteLevelDecode is the ByteLevel decoder for one token: when every rune of
// the token is in the alphabet it gives the bytes they stand for, otherwise
// (an added token such as "<|im end|>" with a space) the token's own UTF-8
// bytes, as HF tokenizers does.
func byteLevelDecode(tok string) []byte {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, ok := runeToByte[r]
		if !ok {
			return []byte(tok)
		}
		out = append(out, b)
	}
	return out
}

// appendLossy appends b as valid UTF-8, replacing each maximal ill-formed
// subsequence by one U+FFFD (the Unicode "maximal subpart" rule that Rust's
// String::from_utf8_lossy, and so HF's decoder, follow).
func appendLossy(dst []byte, b []byte) []byte {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			dst = append(dst, b[i])
			i++
			continue
		}
		n, complete := utf8Prefix(b[i:])
		if complete {
			dst = append(dst, b[i:i+n]...)
		} else {
			dst = append(dst, "\uFFFD"...)
		}
		i += n
	}
	return dst
}

// utf8Prefix looks at the sequence starting at b[0] (a non-ASCII byte). It
// returns the sequence's length when it is a complete valid character
// (complete=true), otherwise the length of its longest prefix that could still
// start a valid character (at least 1).
func utf8Prefix(b []byte) (n int, complete bool) {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c == 0xF4:
		need, hi = 3, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return 1, false
	}
	k := 0
	for k < need {
		if 1+k >= len(b) {
			return 1 + k, false
		}
		x := b[1+k]
		if k == 0 {
			if x < lo || x > hi {
				return 1, false
			}
		} else if x < 0x80 || x > 0xBF {
			return 1 + k, false
		}
		k++
	}
	return 1 + need, true
}

// incompleteTail is the length of a trailing prefix of b that is not yet a
// whole character but could become one with more bytes (0 when b ends on a
// character boundary or on bytes that can never be valid).
func incompleteTail(b []byte) int {
	for back := 1; back <= 3 && back <= len(b); back++ {
		c := b[len(b)-back]
		if c < 0x80 {
			return 0
		}
		if c >= 0xC0 { // a lead byte (or an invalid one)
			n, complete := utf8Prefix(b[len(b)-back:])
			if !complete && n == back {
				return back
			}
			return 0
		}
	}
	return 0
}
