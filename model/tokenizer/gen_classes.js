// Writes unicode_classes.txt: the code points that the Qwen2 split regex treats as \p{L}
// (L), \p{N} (N) and \s (S), exactly as the reference implementation sees them.
//
// The reference is Hugging Face tokenizers, whose regex engine (Oniguruma) has its own
// Unicode tables (16.0 in tokenizers 0.23.2), which need not match the Go toolchain's. So
// the classes are measured from the reference itself: every code point X is put between a
// '.' and an 'a' and the reference pre-tokenizer splits ".Xa"; where the piece boundaries
// fall tells X's class (letter: no boundary; number: boundaries on both sides of X;
// whitespace: a boundary before X only; anything else: a boundary after X only).
//
//   npm install tokenizers@0.23.2      (in some scratch folder, then)
//   NODE_PATH=that/node_modules node gen_classes.js TOKENIZER.json > unicode_classes.txt
//
// Lines: "CLASS FIRST LAST" with hexadecimal code points; code points not listed are
// "other". '\r' and '\n' are whitespace (the splitter treats them by name anyway).
const { Tokenizer } = require('tokenizers');
const tok = Tokenizer.fromFile(process.argv[2]);
const pre = tok.getPreTokenizer();
const cps = [];
for (let c = 0; c <= 0x10ffff; c++) {
  if ((c >= 0xd800 && c <= 0xdfff) || c === 0x0a || c === 0x0d) continue;
  cps.push(c);
}
const cls = new Map([[0x0a, 'S'], [0x0d, 'S']]);
const batch = 20000;
for (let i = 0; i < cps.length; i += batch) {
  const part = cps.slice(i, i + batch);
  let s = '';
  let off = 0;
  const at = [];
  for (const c of part) {
    const x = String.fromCodePoint(c);
    const w = Buffer.byteLength(x, 'utf8');
    at.push([off, w]);
    s += '.' + x + 'a\n';
    off += w + 3;
  }
  const bounds = new Set();
  let b = 0;
  for (const [piece] of pre.preTokenizeString(s)) {
    b += [...piece].length; // byte-level pieces: one character per byte
    bounds.add(b);
  }
  if (b !== off) throw new Error('pieces do not cover the probe text');
  part.forEach((c, j) => {
    const [o, w] = at[j];
    const before = bounds.has(o + 1), after = bounds.has(o + 1 + w);
    cls.set(c, before ? (after ? 'N' : 'S') : (after ? 'O' : 'L'));
  });
}
const all = [...cls.keys()].sort((a, b) => a - b);
const hex = (c) => c.toString(16).toUpperCase();
const lines = ['# Qwen2 split classes measured from tokenizers ' + require('tokenizers/package.json').version + ' by gen_classes.js; do not edit'];
let start = all[0], prev = all[0];
for (let i = 1; i <= all.length; i++) {
  const c = all[i];
  if (i === all.length || cls.get(c) !== cls.get(start) || c !== prev + 1) {
    if (cls.get(start) !== 'O') lines.push(`${cls.get(start)} ${hex(start)} ${hex(prev)}`);
    start = c;
  }
  prev = c;
}
process.stdout.write(lines.join('\n') + '\n');
