// Writes chat cases (testdata/chat_cases.jsonl.gz): random conversations and what the Qwen3
// chat template renders for them, with @huggingface/jinja (a Jinja engine) as the renderer.
//
//   npm install @huggingface/jinja@0.5.11     (in a scratch folder; then, from here:)
//   NODE_PATH=SCRATCH/node_modules node gen_chat_cases.js testdata/tokenizer_config.json 7 600 | gzip -9n > testdata/chat_cases.jsonl.gz
//
// That engine ignores the argument of strip/lstrip/rstrip (it strips all whitespace, where
// Python strips only the given characters), so no generated string has a space or tab at
// either end, where the two would differ; chat_test.go covers that case by hand.
const { Template } = require('@huggingface/jinja');
const fs = require('fs');
const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const tmpl = new Template(cfg.chat_template);
let seed = Number(process.argv[3] || 1);
const rnd = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
const pick = (a) => a[Math.floor(rnd() * a.length)];
const snippets = ['Hi', 'hello world', '', '\n', '\n\n', 'line1\nline2', '<think>', '</think>', '<think>\nplan\n</think>\n\nanswer',
  '<think>a</think>b', '\n<think>\n\nx\n\n</think>\n\n\ny\n', '<tool_response>', '</tool_response>', '<tool_response>r</tool_response>',
  'x</think>y</think>z', '<think>p<think>q</think>r', 'ünïcödé 中文', '{"k": 1}'];
const content = () => { let s = ''; const n = Math.floor(rnd() * 4); for (let i = 0; i < n; i++) s += pick(snippets); return s; };
const out = [];
for (let i = 0; i < Number(process.argv[4] || 500); i++) {
  const msgs = [];
  const n = 1 + Math.floor(rnd() * 6);
  for (let j = 0; j < n; j++) {
    const role = j === 0 && rnd() < 0.4 ? 'system' : pick(['user', 'user', 'assistant', 'assistant', 'tool', 'system']);
    const m = { role, content: content() };
    if (role === 'assistant' && rnd() < 0.3) m.reasoning_content = content();
    if (role === 'assistant' && rnd() < 0.3) {
      m.tool_calls = [];
      const k = 1 + Math.floor(rnd() * 2);
      for (let q = 0; q < k; q++) m.tool_calls.push({ type: 'function', function: { name: pick(['get', 'f', 'search']), arguments: pick(['{}', '{"a": 1}', '{"q": "x y"}']) } });
    }
    msgs.push(m);
  }
  const opts = { add_generation_prompt: rnd() < 0.6 };
  if (rnd() < 0.5) opts.enable_thinking = rnd() < 0.5;
  if (rnd() < 0.2) opts.tools = [{ type: 'function', function: { name: 'get', description: 'Get it', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  let rendered;
  try { rendered = tmpl.render({ messages: msgs, ...opts }); } catch (e) { rendered = null; }
  out.push(JSON.stringify({ messages: msgs, options: opts, rendered }));
}
process.stdout.write(out.join('\n') + '\n');
