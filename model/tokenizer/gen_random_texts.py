"""Writes random texts (JSON strings, one a line) for differential tests against the
reference: pieces from every category the tokenizer cares about (contractions, whitespace
kinds, added tokens and fragments of them, scripts, digits, emoji sequences, marks,
controls, noncharacters), random code points from all planes, runs of spaces, and a few
long repeats.

    python3 gen_random_texts.py SEED COUNT | node gen_reference.js cases TOKENIZER.json > cases.jsonl
"""
import json, random, sys
rng = random.Random(int(sys.argv[1]))
N = int(sys.argv[2])
pieces = ["'s","'t","'re","'ve","'m","'ll","'d","'S","'LL","'Re","'ſ","’s"," ","  ","\t","\n","\r\n","\r","\u00a0","\u3000","\u2028","\u0085","\x0b","\x0c","\u200b","\ufeff",
 "<|im_start|>","<|im_end|>","<think>","</think>","<|endoftext|>","<tool_call>","<|fim_prefix|>","<|","|>","<",">",
 "hello","World","THE","ça","naïve","Straße","İstanbul","ǅ","ﬁ","Ⅻ","½","²","١٢٣","१२३","１２３","0","7","42","3.14",
 "中文","日本語","ｶﾀｶﾅ","한국어","\u1100\u1161\u11a8","e\u0301","A\u030a","\u2126","\u212b","\uf900","\u0958","a\u0327\u0301","\u0344",
 "😀","👍🏽","👨‍👩‍👧","🇯🇵","🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f","1️⃣","❤️","☺︎",
 "مرحبا","שָׁלוֹם","नमस्ते","สวัสดี","Привет","Γειά","ትግርኛ","ქართული","Հայերեն","தமிழ்","বাংলা",
 "!","?","...","--","==","->","{}","()","[]","\"","`","#","@","$","%","^","&","*","_","~","|","\\","/",":",";",",",".",
 "\ufffd","\uffff","\U0010fffd","\ue000","\x00","\x1b","\x7f","\x85","\u202e","\u200d","\u200c","\u0300"*5,
 "https://example.com/a?b=c","user@example.com","C:\\path\\file.txt","0x1F","2026-11-29","1,234,567.89"]
def rand_cp():
    while True:
        c = rng.choice([rng.randrange(0x20, 0x7f), rng.randrange(0xa0, 0x3000), rng.randrange(0x3000, 0xd800), rng.randrange(0xe000, 0x10000), rng.randrange(0x10000, 0x110000), rng.randrange(0, 0x20)])
        if not (0xd800 <= c <= 0xdfff): return chr(c)
for i in range(N):
    k = rng.random()
    parts = []
    for _ in range(rng.randint(1, 25)):
        r = rng.random()
        if r < 0.6: parts.append(rng.choice(pieces))
        elif r < 0.8: parts.append(rand_cp())
        else: parts.append(" " * rng.randint(0, 5) + rng.choice(pieces))
    s = "".join(parts)
    if k < 0.02: s = s * rng.randint(20, 200)
    print(json.dumps(s, ensure_ascii=False))
