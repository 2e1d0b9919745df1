package chat

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// The engine's tojson filter formats floats with Go's %g (1.0 becomes "1",
// Python's json.dumps writes "1.0") and escapes U+2028/U+2029, which Python's
// ensure_ascii=False leaves alone. Its filters cannot be replaced, so an
// output tag that is exactly `{{ path | tojson }}`, the path a variable with
// .attr, [0] or ['key'] steps (what chat templates use
// for tool schemas and call arguments) is rewritten to call pyToJSON, which
// writes what transformers' tojson (json.dumps(x, ensure_ascii=False))
// writes. Other uses keep the engine's filter.
var tojsonTag = regexp.MustCompile(`\{\{(-?)(\s*)([A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[-?\d+\]|\['[^'\]]*'\]|\["[^"\]]*"\])*)\s*\|\s*tojson(\s*)(-?)\}\}`)

const tojsonFunc = "__strata_tojson"

// printTag is an output tag of a bare path, `{{ message.content }}`: the
// engine prints None as "" and 1.0 as "1" where Python's Jinja prints "None"
// and "1.0", so such tags go through pyPrint, which gives those two Python's
// text and hands every other value back to the engine unchanged.
var printTag = regexp.MustCompile(`\{\{(-?)(\s*)([A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[-?\d+\]|\['[^'\]]*'\]|\["[^"\]]*"\])*)(\s*)(-?)\}\}`)

const printFunc = "__strata_print"

var rawBlock = regexp.MustCompile(`\{%-?\s*raw\s*-?%\}`)

// rewriteOutputs routes {{ path | tojson }} and {{ path }} through the
// Python-compatible functions; the line structure is kept, so error lines
// still match the source.
func rewriteOutputs(src string) string {
	if rawBlock.MatchString(src) {
		return src // {% raw %} text must stay as written
	}
	src = tojsonTag.ReplaceAllString(src, "{{${1}${2}"+tojsonFunc+"(${3})${4}${5}}}")
	return printTag.ReplaceAllStringFunc(src, func(tag string) string {
		m := printTag.FindStringSubmatch(tag)
		switch m[3] {
		case "true", "false", "none", "True", "False", "None", "loop", "namespace":
			return tag
		}
		return "{{" + m[1] + m[2] + printFunc + "(" + m[3] + ")" + m[4] + m[5] + "}}"
	})
}

var printCallable = jinja.NewCallable(printFunc, func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 1 {
		return jinja.Undefined(), fmt.Errorf("print: want one value")
	}
	switch v := args[0]; {
	case v.IsNone():
		return jinja.NewString("None"), nil
	case v.IsFloat():
		return jinja.NewString(pyFloatStr(v.AsFloat())), nil
	default:
		return v, nil
	}
})

// pyFloatStr is Python's str(float): repr, with inf and nan spelled as Python does.
func pyFloatStr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return pyFloat(f)
}

var tojsonCallable = jinja.NewCallable(tojsonFunc, func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 1 {
		return jinja.Undefined(), fmt.Errorf("tojson: want one value")
	}
	var b strings.Builder
	if err := pyJSON(&b, args[0]); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(b.String()), nil
})

// pyJSON writes v as Python's json.dumps(v, ensure_ascii=False) does.
func pyJSON(b *strings.Builder, v jinja.Value) error {
	switch {
	case v.IsUndefined() || v.IsNone():
		b.WriteString("null")
	case v.IsBool():
		b.WriteString(strconv.FormatBool(v.AsBool()))
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		b.WriteString(pyFloat(v.AsFloat()))
	case v.IsString():
		pyString(b, v.AsString())
	case v.IsList():
		b.WriteByte('[')
		for i, e := range v.AsList().Items {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := pyJSON(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		b.WriteByte('{')
		for i, k := range d.Keys {
			if i > 0 {
				b.WriteString(", ")
			}
			pyString(b, k)
			b.WriteString(": ")
			if err := pyJSON(b, d.Data[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("tojson: cannot encode %s", v.String())
	}
	return nil
}

// pyFloat is Python's float repr: the shortest digits that round-trip, in
// fixed notation with a ".0" for whole numbers when the exponent is in
// [-4, 16), else as d.ddde±XX.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX, at least two exponent digits
	exp, _ := strconv.Atoi(e[strings.LastIndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return e
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// pyString quotes s as json.dumps does with ensure_ascii=False: only the
// quote, the backslash and the C0 controls are escaped.
func pyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+w])
		}
		i += w
	}
	b.WriteByte('"')
}
