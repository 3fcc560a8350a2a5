package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

// TestNFCAgainstReference compares nfc with the reference normalizer (Hugging Face
// tokenizers' NFC) on 2001 strings dense in combining marks, decomposable characters and
// Hangul (testdata/nfc_cases.jsonl, from gen_nfc_cases.py and gen_reference.js). About a
// hundred recent marks are starters to the reference, whose Unicode data is old; Python's
// NFC would reorder them and give a different answer in 17 of these strings.
func TestNFCAgainstReference(t *testing.T) {
	f, err := os.Open("testdata/nfc_cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n, changed := 0, 0
	for sc.Scan() {
		var c struct{ In, NFC string }
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		n++
		if c.In != c.NFC {
			changed++
		}
		if got := nfc(c.In); got != c.NFC {
			t.Errorf("nfc(%+q) = %+q, want %+q", c.In, got, c.NFC)
		}
	}
	if n != 2001 || changed < 500 {
		t.Fatalf("read %d cases, %d changed by NFC; the file is not what the test expects", n, changed)
	}
}

func TestNFCExamples(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"cafe\u0301", "caf\u00e9"},
		{"A\u030a", "\u00c5"},
		{"\u2126", "\u03a9"},                           // Ohm sign is a singleton
		{"\u212b", "\u00c5"},                           // Angstrom sign
		{"\uf900", "\u8c48"},                           // CJK compatibility ideograph
		{"\u1100\u1161\u11a8", "\uac01"},               // L V T jamo compose to one syllable
		{"\uac00\u11a8", "\uac01"},                     // LV syllable + T
		{"a\u0301\u0327", "\u00e1\u0327"},              // reordered: cedilla (202) before acute (230)
		{"\u0958", "\u0915\u093c"},                     // composition exclusion stays decomposed
		{"a\xffe\u0301", "a\xff\u00e9"},                // invalid bytes pass through
		{"\u0301x", "\u0301x"},                         // a leading mark stays
		{"plain ascii", "plain ascii"},                 // fast path
		{"\u4e2d\u6587 \u00e9", "\u4e2d\u6587 \u00e9"}, // already NFC
	} {
		if got := nfc(tc.in); got != tc.want {
			t.Errorf("nfc(%+q) = %+q, want %+q", tc.in, got, tc.want)
		}
	}
}

// TestNFCSafeBelow checks the fast path's premise: no rune below nfcSafeBelow is unsafe.
func TestNFCSafeBelow(t *testing.T) {
	tab := nfcData()
	for r := rune(0); r < nfcSafeBelow; r++ {
		if tab.unsafe[r/64]&(1<<(r%64)) != 0 {
			t.Fatalf("U+%04X is NFC-unsafe but below nfcSafeBelow", r)
		}
	}
	if tab.unsafe[0x301/64]&(1<<(0x301%64)) == 0 {
		t.Fatalf("U+0301 is not marked unsafe; the table did not load")
	}
}
