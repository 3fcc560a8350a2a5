package tokenizer

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// PythonJSON rewrites JSON text the way the chat template's tojson filter prints it:
// Python's json.dumps(value, ensure_ascii=False) after json.loads. Keys keep their order;
// separators are ", " and ": "; strings escape only '"', '\\' and control characters;
// integers print as written (without a sign on zero) and other numbers as Python's float
// repr ("1e+20", "100.0", "1e-07"). Duplicate keys are an error, since Python would
// silently keep the last one.
func PythonJSON(text string) (string, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var b strings.Builder
	if err := writePythonJSON(&b, dec); err != nil {
		return "", fmt.Errorf("tokenizer: tool JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", fmt.Errorf("tokenizer: tool JSON: text after the value")
	}
	return b.String(), nil
}

func writePythonJSON(b *strings.Builder, dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			b.WriteByte('{')
			seen := map[string]bool{}
			for i := 0; dec.More(); i++ {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				key := k.(string)
				if seen[key] {
					return fmt.Errorf("key %q appears twice", clip(key))
				}
				seen[key] = true
				if i > 0 {
					b.WriteString(", ")
				}
				writePythonString(b, key)
				b.WriteString(": ")
				if err := writePythonJSON(b, dec); err != nil {
					return err
				}
			}
			b.WriteByte('}')
		case '[':
			b.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					b.WriteString(", ")
				}
				if err := writePythonJSON(b, dec); err != nil {
					return err
				}
			}
			b.WriteByte(']')
		}
		_, err := dec.Token() // the closing delimiter
		return err
	case string:
		writePythonString(b, v)
	case json.Number:
		s, err := pythonNumber(string(v))
		if err != nil {
			return err
		}
		b.WriteString(s)
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil:
		b.WriteString("null")
	}
	return nil
}

func writePythonString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// pythonNumber formats a JSON number as json.dumps(json.loads(n)) does.
func pythonNumber(n string) (string, error) {
	if !strings.ContainsAny(n, ".eE") {
		if strings.TrimLeft(n, "-0") == "" {
			return "0", nil // -0 is the integer 0
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil || math.IsInf(f, 0) {
		return "", fmt.Errorf("number %s does not fit a float64", n)
	}
	// Shortest round-trip digits, then Python's repr layout: positional when the decimal
	// exponent is in [-4, 16), scientific otherwise, with at least two exponent digits.
	e := strconv.FormatFloat(f, 'e', -1, 64) // [-]d[.ddd]e±XX
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	sign := ""
	if strings.HasPrefix(mant, "-") {
		sign, mant = "-", mant[1:]
	}
	digits := strings.Replace(mant, ".", "", 1)
	if exp < -4 || exp >= 16 {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		es := "+"
		if exp < 0 {
			es, exp = "-", -exp
		}
		return fmt.Sprintf("%s%se%s%02d", sign, m, es, exp), nil
	}
	var out string
	switch point := exp + 1; {
	case point <= 0:
		out = "0." + strings.Repeat("0", -point) + digits
	case point >= len(digits):
		out = digits + strings.Repeat("0", point-len(digits)) + ".0"
	default:
		out = digits[:point] + "." + digits[point:]
	}
	return sign + out, nil
}
