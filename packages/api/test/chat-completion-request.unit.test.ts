import { describe, expect, it } from '@jest/globals';
import { chatCompletionRequestSchema, readChatCompletionRequest } from '../src/schemas.js';

const USER = { role: 'user', content: 'Hello' };
const VALID = { model: 'llama3:8b', messages: [USER] };

/** The refusal of `body`: its param and message; fails the test when the body is taken. */
function refusal(body: unknown): { param: string; message: string } {
  const read = readChatCompletionRequest(body);
  if (read.ok) throw new Error(`taken: ${JSON.stringify(body)}`);
  return { param: read.param, message: read.message };
}

describe('readChatCompletionRequest: what it takes', () => {
  it('reads a minimal body: not streamed, no conversation', () => {
    expect(readChatCompletionRequest(VALID)).toEqual({
      ok: true,
      request: { model: 'llama3:8b', messages: [{ role: 'user', content: 'Hello' }], stream: false },
    });
  });

  it('joins text parts with a newline, takes every role, stream and conversation_id', () => {
    const read = readChatCompletionRequest({
      model: 'm',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'developer', content: [] },
        { role: 'assistant', content: 'hi', name: 'bot' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'one' },
            { type: 'text', text: 'two' },
          ],
        },
      ],
      stream: true,
      conversation_id: 'c-1',
    });
    expect(read).toEqual({
      ok: true,
      request: {
        model: 'm',
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'developer', content: '' },
          { role: 'assistant', content: 'hi' },
          { role: 'user', content: 'one\ntwo' },
        ],
        stream: true,
        conversationId: 'c-1',
      },
    });
  });

  it('accepts and ignores other OpenAI fields, empty tool lists, tool_choice none and null optionals', () => {
    const read = readChatCompletionRequest({
      ...VALID,
      temperature: 0.2,
      max_tokens: 5,
      top_p: 1,
      tools: [],
      functions: null,
      tool_choice: 'none',
      function_call: null,
      stream: null,
      conversation_id: '',
      messages: [{ ...USER, tool_calls: null, function_call: null }],
    });
    expect(read).toEqual({ ok: true, request: { ...VALID, stream: false } });
  });

  it('counts conversation_id in code points: 64 emoji are taken', () => {
    const id = '😀'.repeat(64);
    const read = readChatCompletionRequest({ ...VALID, conversation_id: id });
    expect(read.ok && read.request.conversationId).toBe(id);
  });

  it('is the schema the reader uses', () => {
    expect(chatCompletionRequestSchema.parse(VALID)).toEqual({ ...VALID, stream: false });
  });
});

describe('readChatCompletionRequest: each refusal, with its param and message', () => {
  it.each([
    ['an array', [VALID], 'body', 'The body must be a JSON object.'],
    ['null', null, 'body', 'The body must be a JSON object.'],
    ['no model', { messages: [USER] }, 'model', 'model is required: an id from GET /v1/models.'],
    ['a null model', { ...VALID, model: null }, 'model', 'model is required: an id from GET /v1/models.'],
    ['an empty model', { ...VALID, model: '' }, 'model', 'model must be a model id from GET /v1/models.'],
    [
      'a model that is a number',
      { ...VALID, model: 7 },
      'model',
      'model must be a model id from GET /v1/models.',
    ],
    ['no messages', { model: 'm' }, 'messages', 'messages is required.'],
    [
      'messages that are no list',
      { model: 'm', messages: 'hi' },
      'messages',
      'messages must be a list of messages.',
    ],
    [
      'no message at all',
      { model: 'm', messages: [] },
      'messages',
      'messages must hold at least one message.',
    ],
    [
      'a message that is no object',
      { model: 'm', messages: ['hi'] },
      'messages[0]',
      'messages[0] must be an object with a role and content.',
    ],
    [
      'a message with no role',
      { model: 'm', messages: [{ content: 'x' }] },
      'messages[0].role',
      'messages[0].role is required.',
    ],
    [
      'the tool role',
      { model: 'm', messages: [{ role: 'tool', content: 'x' }] },
      'messages[0].role',
      'Role "tool" is not supported: tools and function calling are not.',
    ],
    [
      'another role',
      { model: 'm', messages: [{ role: 'robot', content: 'x' }] },
      'messages[0].role',
      'messages[0].role "robot" is not supported; use system, developer, user or assistant.',
    ],
    [
      'a role that is null',
      { model: 'm', messages: [{ role: null, content: 'x' }] },
      'messages[0].role',
      'messages[0].role null is not supported; use system, developer, user or assistant.',
    ],
    [
      'tool calls in a message',
      { model: 'm', messages: [{ role: 'assistant', content: 'x', tool_calls: [{}] }, USER] },
      'messages[0]',
      'Tools and function calling are not supported.',
    ],
    [
      'no content',
      { model: 'm', messages: [{ role: 'user' }] },
      'messages[0].content',
      'messages[0].content must be a string or a list of text parts.',
    ],
    [
      'a part that is no object',
      { model: 'm', messages: [{ role: 'user', content: ['x'] }] },
      'messages[0].content[0]',
      'messages[0].content[0] must be a content part object with a type.',
    ],
    [
      'a part with no type',
      { model: 'm', messages: [{ role: 'user', content: [{ text: 'x' }] }] },
      'messages[0].content[0]',
      'messages[0].content[0] must be a content part object with a type.',
    ],
    [
      'an image part',
      { model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] },
      'messages[0].content[0]',
      'Image content parts are not supported; send text only.',
    ],
    [
      'another part type',
      { model: 'm', messages: [{ role: 'user', content: [{ type: 'input_audio' }] }] },
      'messages[0].content[0]',
      'Content part type "input_audio" is not supported; send text parts only.',
    ],
    [
      'a text part without text',
      { model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text' }] }] },
      'messages[0].content[1].text',
      'messages[0].content[1].text must be a string.',
    ],
    [
      'a last message that is not the user’s',
      { model: 'm', messages: [USER, { role: 'assistant', content: 'x' }] },
      'messages[1].role',
      "The last message must be the user's.",
    ],
    [
      'tools',
      { ...VALID, tools: [{ type: 'function' }] },
      'tools',
      'Tools and function calling are not supported.',
    ],
    ['functions', { ...VALID, functions: {} }, 'functions', 'Tools and function calling are not supported.'],
    [
      'a tool choice',
      { ...VALID, tool_choice: 'auto' },
      'tool_choice',
      'Tools and function calling are not supported.',
    ],
    [
      'a function call',
      { ...VALID, function_call: 'auto' },
      'function_call',
      'Tools and function calling are not supported.',
    ],
    ['stream as a string', { ...VALID, stream: 'true' }, 'stream', 'stream must be a boolean.'],
    [
      'a conversation_id that is a number',
      { ...VALID, conversation_id: 7 },
      'conversation_id',
      'conversation_id must be a string.',
    ],
    [
      'a conversation_id of 65 characters',
      { ...VALID, conversation_id: 'a'.repeat(65) },
      'conversation_id',
      'conversation_id must be at most 64 characters.',
    ],
  ])('%s', (_what, body, param, message) => {
    expect(refusal(body)).toEqual({ param, message });
  });

  it('answers the first problem in reading order: the model before the messages, a message before the tools', () => {
    expect(refusal({ messages: 'x', stream: 'x' }).param).toBe('model');
    expect(refusal({ model: 'm', messages: [{ role: 'robot' }], tools: [{}] }).param).toBe(
      'messages[0].role',
    );
    expect(refusal({ model: 'm', messages: [{ role: 'robot' }, 'x'] }).param).toBe('messages[0].role');
    // Within a message: its role, then its tool calls, then its content.
    expect(refusal({ model: 'm', messages: [{ role: 'user', tool_calls: [{}] }] }).param).toBe('messages[0]');
    // The last message's role is judged once every message is well-formed.
    expect(refusal({ model: 'm', messages: [{ role: 'assistant', content: 'x' }, 'x'] }).param).toBe(
      'messages[1]',
    );
    expect(refusal({ ...VALID, tools: [{}], stream: 1 }).param).toBe('tools');
    expect(refusal({ ...VALID, stream: 1, conversation_id: 1 }).param).toBe('stream');
  });
});
