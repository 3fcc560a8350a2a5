#!/usr/bin/env python3
"""Writes random strings heavy in the code points NFC acts on, as {"in": s, "nfc": ...} lines.
The "nfc" field is Python's; gen_reference.js replaces it with the reference's:

    python3 gen_nfc_cases.py | node gen_reference.js nfc-cases > testdata/nfc_cases.jsonl
"""
import json, random, unicodedata as u

rng = random.Random(20261129)
marks, decomposable = [], []
for cp in range(0x110000):
    if 0xD800 <= cp <= 0xDFFF or 0xAC00 <= cp <= 0xD7A3:
        continue
    ch = chr(cp)
    if u.combining(ch):
        marks.append(ch)
    elif u.normalize("NFD", ch) != ch:
        decomposable.append(ch)
jamo = [chr(c) for c in list(range(0x1100, 0x1113)) + list(range(0x1161, 0x1176)) + list(range(0x11A7, 0x11C3))]
hangul = [chr(c) for c in range(0xAC00, 0xD7A4)]
plain = list("aeiouAEIOUCcNnSs<>= ") + ["\u0627", "\u0915", "\u0b47", "\u0bc6", "\u0cc6", "\u0d46", "\u1025"]
categories = [marks, decomposable, jamo, hangul, plain, plain]
print(json.dumps({"in": "", "nfc": ""}))
for _ in range(2000):
    s = "".join(rng.choice(rng.choice(categories)) for _ in range(rng.randint(1, 8)))
    print(json.dumps({"in": s, "nfc": u.normalize("NFC", s)}))
