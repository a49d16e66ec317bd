import { describe, expect, it } from '@jest/globals';
import {
  InvalidPromptError,
  decodePromptPlaintext,
  encodePromptPlaintext,
  generateReplyKey,
  type Prompt,
} from '../src/index.js';

const replyKey = new Uint8Array(32).fill(7);
const prompt: Prompt = {
  model: 'qwen2.5:0.5b',
  messages: [
    { role: 'system', content: 'sys' },
    { role: 'developer', content: 'dev' },
    { role: 'user', content: 'q1' },
    { role: 'assistant', content: 'a1' },
    { role: 'user', content: 'q2 "quoted" ünïcode' },
  ],
  replyKey,
};

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text);
const replyKeyBase64 = Buffer.from(replyKey).toString('base64');

function promptJson(overrides: Record<string, unknown>): Uint8Array {
  return utf8(
    JSON.stringify({
      v: 1,
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      replyKey: replyKeyBase64,
      ...overrides,
    }),
  );
}

describe('prompt plaintext', () => {
  it('encodes the v1 JSON with its keys in protocol order', () => {
    const text = new TextDecoder().decode(
      encodePromptPlaintext({ model: 'm', messages: [{ role: 'user', content: 'hi' }], replyKey }),
    );
    expect(text).toBe(
      `{"v":1,"model":"m","messages":[{"role":"user","content":"hi"}],"replyKey":"${replyKeyBase64}"}`,
    );
  });

  it('round-trips a conversation of every role', () => {
    const decoded = decodePromptPlaintext(encodePromptPlaintext(prompt));
    expect(decoded).toEqual({ model: prompt.model, messages: prompt.messages, replyKey });
  });

  it('makes a fresh 32-byte reply key each time', () => {
    const a = generateReplyKey();
    expect(a.length).toBe(32);
    expect(a).not.toEqual(generateReplyKey());
  });

  it('ignores unknown fields', () => {
    const decoded = decodePromptPlaintext(promptJson({ extra: true }));
    expect(decoded.model).toBe('m');
    expect(Object.keys(decoded).sort()).toEqual(['messages', 'model', 'replyKey']);
  });

  const invalid: Array<[string, Uint8Array]> = [
    ['not UTF-8', new Uint8Array([0x7b, 0xff, 0x7d])],
    ['not JSON', utf8('{"v":1,')],
    ['a JSON array', utf8('[]')],
    ['JSON null', utf8('null')],
    ['version 2', promptJson({ v: 2 })],
    ['version as a string', promptJson({ v: '1' })],
    ['no model', promptJson({ model: undefined })],
    ['an empty model', promptJson({ model: '' })],
    ['messages not an array', promptJson({ messages: {} })],
    ['no messages', promptJson({ messages: [] })],
    ['a message that is not an object', promptJson({ messages: ['hi'] })],
    [
      'an unknown role',
      promptJson({
        messages: [
          { role: 'tool', content: 'x' },
          { role: 'user', content: 'hi' },
        ],
      }),
    ],
    [
      'content parts instead of a string',
      promptJson({ messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }] }),
    ],
    [
      'the last message from the assistant',
      promptJson({
        messages: [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: 'yo' },
        ],
      }),
    ],
    ['no replyKey', promptJson({ replyKey: undefined })],
    ['a 16-byte replyKey', promptJson({ replyKey: Buffer.alloc(16).toString('base64') })],
    [
      'a replyKey with junk characters',
      promptJson({ replyKey: `${replyKeyBase64.slice(0, 10)}!${replyKeyBase64.slice(10)}` }),
    ],
    ['a base64url replyKey', promptJson({ replyKey: Buffer.alloc(32, 0xfb).toString('base64url') })],
  ];
  it.each(invalid)('rejects %s with InvalidPromptError', (_name, bytes) => {
    expect(() => decodePromptPlaintext(bytes)).toThrow(InvalidPromptError);
  });

  it('refuses to encode a prompt whose last message is not the user’s', () => {
    expect(() =>
      encodePromptPlaintext({
        ...prompt,
        messages: [...prompt.messages, { role: 'assistant', content: 'x' }],
      }),
    ).toThrow(InvalidPromptError);
    expect(() => encodePromptPlaintext({ ...prompt, replyKey: new Uint8Array(31) })).toThrow(
      InvalidPromptError,
    );
  });
});
