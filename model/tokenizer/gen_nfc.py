#!/usr/bin/env python3
"""Writes nfc_data.txt: the Unicode data that NFC normalization needs, as the reference
implementation (Hugging Face tokenizers) has it.

    node gen_reference.js nfc > /tmp/nfc_ref.json      (see gen_reference.js)
    python3 gen_nfc.py /tmp/nfc_ref.json > nfc_data.txt

The reference normalizer's tables are older than Python's (before Unicode 10 in tokenizers
0.23.2), so its measured behaviour decides what is listed: decompositions and NFC changes are
the reference's; combining classes and composition pairs come from Python's unicodedata
(both are stable across Unicode versions) for the characters the reference knows.
Line kinds (code points in hex):
  c CP CCC         canonical combining class, only where it is not 0
  d CP X [Y ...]   full canonical decomposition (Hangul syllables are algorithmic, not listed)
  p A B C          primary composite: A followed by B composes to C (Hangul not listed)
  n CP             NFC maps the single code point CP to something else
"""
import json
import sys
import unicodedata as u

ref = json.load(open(sys.argv[1]))
nfd, nfc, starters = ref["nfd"], ref["nfc"], set(ref["starters"])
h = lambda c: "%X" % c
hangul = range(0xAC00, 0xD7A4)
print("# from tokenizers %s (Python unicodedata %s for classes and pairs) by gen_nfc.py; do not edit"
      % (ref["version"], u.unidata_version))
for cp in range(0x110000):
    if 0xD800 <= cp <= 0xDFFF:
        continue
    c = u.combining(chr(cp))
    if c and h(cp) not in starters:
        print("c %X %d" % (cp, c))
for cp in range(0x110000):
    if h(cp) in nfd and cp not in hangul:
        print("d %X %s" % (cp, " ".join(nfd[h(cp)])))
for cp in range(0x110000):
    if 0xD800 <= cp <= 0xDFFF or cp in hangul or h(cp) not in nfd or h(cp) in nfc:
        continue
    dec = u.decomposition(chr(cp))
    if not dec or dec.startswith("<"):
        continue
    parts = dec.split()
    if len(parts) == 2:
        print("p %X %X %X" % (int(parts[0], 16), int(parts[1], 16), cp))
for cp in range(0x110000):
    if h(cp) in nfc:
        print("n %X" % cp)
