// Measures facts from the reference implementation, Hugging Face tokenizers, for data files
// of this package. Its Unicode tables are its own (the split regex engine has Unicode 16.0,
// the NFC normalizer data from before Unicode 10 in tokenizers 0.23.2) and need not match
// Go's or Python's, so they are measured rather than assumed.
//
//   npm install tokenizers@0.23.2                  (in a scratch folder; then, from here:)
//   export NODE_PATH=SCRATCH/node_modules
//   node gen_reference.js classes TOKENIZER.json > unicode_classes.txt
//   node gen_reference.js nfc > /tmp/nfc_ref.json && python3 gen_nfc.py /tmp/nfc_ref.json > nfc_data.txt
//   python3 gen_nfc_cases.py | node gen_reference.js nfc-cases > testdata/nfc_cases.jsonl
//   python3 gen_random_texts.py 3 2000 | node gen_reference.js cases TOKENIZER.json | gzip -9n > testdata/random_cases.jsonl.gz
const tokenizers = require('tokenizers');
const version = require('tokenizers/package.json').version;
const hex = (c) => c.toString(16).toUpperCase();

function allCodePoints(skip) {
  const cps = [];
  for (let c = 0; c <= 0x10ffff; c++) if (!(c >= 0xd800 && c <= 0xdfff) && !skip(c)) cps.push(c);
  return cps;
}

// classes: the code points the Qwen2 split regex treats as \p{L} (L), \p{N} (N) and \s
// (S). Each code point X goes between '.' and 'a' and the reference pre-tokenizer splits
// ".Xa"; the piece boundaries tell X's class (letter: none; number: both sides of X;
// whitespace: before X only; other: after X only). Lines: "CLASS FIRST LAST" in hex;
// code points not listed are "other".
function classes(tokenizerPath) {
  const pre = tokenizers.Tokenizer.fromFile(tokenizerPath).getPreTokenizer();
  const cps = allCodePoints((c) => c === 0x0a || c === 0x0d);
  const cls = new Map([[0x0a, 'S'], [0x0d, 'S']]);
  for (let i = 0; i < cps.length; i += 20000) {
    const part = cps.slice(i, i + 20000);
    let s = '', off = 0;
    const at = [];
    for (const c of part) {
      const x = String.fromCodePoint(c), w = Buffer.byteLength(x, 'utf8');
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
  const lines = ['# Qwen2 split classes measured from tokenizers ' + version + ' by gen_reference.js; do not edit'];
  let start = all[0], prev = all[0];
  for (let i = 1; i <= all.length; i++) {
    const c = all[i];
    if (i === all.length || cls.get(c) !== cls.get(start) || c !== prev + 1) {
      if (cls.get(start) !== 'O') lines.push(`${cls.get(start)} ${hex(start)} ${hex(prev)}`);
      start = c;
    }
    prev = c;
  }
  return lines.join('\n') + '\n';
}

// nfc: JSON with the reference normalizer's NFD and NFC of every code point they change,
// and the marks (by this Node's Unicode) whose combining class the reference treats as 0:
// U+0345 (class 240) before a mark of class 1..239 is reordered, and a mark of class
// above 230 is moved after U+0301; a mark with neither is a starter to the reference.
function nfc() {
  const nfcN = tokenizers.nfcNormalizer(), nfdN = tokenizers.nfdNormalizer();
  const sep = '\u0001'; // a starter that composes with nothing
  const cps = allCodePoints((c) => c === 1);
  const out = { version, nfd: {}, nfc: {}, starters: [] };
  for (let i = 0; i < cps.length; i += 50000) {
    const part = cps.slice(i, i + 50000);
    const s = part.map((c) => String.fromCodePoint(c)).join(sep);
    const a = nfcN.normalizeString(s).split(sep), d = nfdN.normalizeString(s).split(sep);
    if (a.length !== part.length || d.length !== part.length) throw new Error('separator lost');
    part.forEach((c, j) => {
      const x = String.fromCodePoint(c);
      if (a[j] !== x) out.nfc[hex(c)] = [...a[j]].map((y) => hex(y.codePointAt(0)));
      if (d[j] !== x) out.nfd[hex(c)] = [...d[j]].map((y) => hex(y.codePointAt(0)));
    });
  }
  const marks = cps.filter((c) => /\p{M}/u.test(String.fromCodePoint(c)) && !out.nfd[hex(c)]);
  const probes = [];
  for (const c of marks) {
    const x = String.fromCodePoint(c);
    probes.push('\u0345' + x, x + '\u0301');
  }
  const res = nfdN.normalizeString(probes.join(sep)).split(sep);
  marks.forEach((c, j) => {
    if (res[2 * j] === probes[2 * j] && res[2 * j + 1] === probes[2 * j + 1]) out.starters.push(hex(c));
  });
  return JSON.stringify(out) + '\n';
}

// nfc-cases: reads JSON lines {"in": s, ...} on stdin and writes {"in": s, "nfc": NFC(s)}
// with the reference normalizer's NFC.
function nfcCases() {
  const n = tokenizers.nfcNormalizer();
  const lines = require('fs').readFileSync(0, 'utf8').split('\n').filter(Boolean);
  return lines.map((l) => { const s = JSON.parse(l).in; return JSON.stringify({ in: s, nfc: n.normalizeString(s) }); }).join('\n') + '\n';
}

// cases: reads texts (JSON strings, one a line) on stdin and writes case lines in the
// format of cases.jsonl. "ids" needs special tokens left unparsed, which these bindings
// have no switch for, so a second tokenizer is built with every special added token's
// content replaced by text that cannot occur (ids unchanged): their literal text is then
// ordinary text, while the non-special added tokens still match, as with
// encode_special_tokens = True.
async function cases(tokenizerPath) {
  const fs = require('fs');
  const full = tokenizers.Tokenizer.fromFile(tokenizerPath);
  const json = JSON.parse(fs.readFileSync(tokenizerPath, 'utf8'));
  for (const a of json.added_tokens) if (a.special) a.content = '\ue000\ue001never' + a.id + '\ue002';
  const tmp = require('os').tmpdir() + '/gen_reference_plain_' + process.pid + '.json';
  fs.writeFileSync(tmp, JSON.stringify(json));
  const plain = tokenizers.Tokenizer.fromFile(tmp);
  fs.unlinkSync(tmp);
  const out = [];
  for (const line of fs.readFileSync(0, 'utf8').split('\n').filter(Boolean)) {
    const text = JSON.parse(line);
    const ids = (await plain.encode(text, null, { addSpecialTokens: false })).getIds();
    const ids2 = (await full.encode(text, null, { addSpecialTokens: true })).getIds();
    out.push(JSON.stringify({ text, ids, ids_with_special_parsing: ids2, decoded: await full.decode(ids, false),
      decoded_with_special_parsing: await full.decode(ids2, false), category: 'random' }));
  }
  return out.join('\n') + '\n';
}

const cmd = process.argv[2];
const run = { classes: () => classes(process.argv[3]), nfc, 'nfc-cases': nfcCases, cases: () => cases(process.argv[3]) }[cmd];
if (!run) {
  console.error('usage: node gen_reference.js classes TOKENIZER.json | nfc | nfc-cases < INPUTS | cases TOKENIZER.json < TEXTS');
  process.exit(2);
}
Promise.resolve(run()).then((s) => process.stdout.write(s));
