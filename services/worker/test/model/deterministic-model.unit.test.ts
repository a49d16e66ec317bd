import { describe, expect, it } from '@jest/globals';
import {
  DeterministicModel,
  ModelGenerationError,
  deterministicAnswer,
  parseGenerationFault,
  restartedDeterministicAnswer,
  tokenize,
  type GenerationEvent,
  type GenerationFault,
} from '../../src/model/index.js';

const MODEL = 'svc-deterministic';
const conversation = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'What is the capital of France?' },
];

async function collect(
  model: DeterministicModel,
  messages = conversation,
  signal = new AbortController().signal,
) {
  const events: GenerationEvent[] = [];
  try {
    for await (const event of model.generate({ model: MODEL, messages, signal })) events.push(event);
    return { events, error: undefined };
  } catch (error) {
    return { events, error };
  }
}

function textOf(events: GenerationEvent[]): string {
  return events.map((event) => (event.kind === 'text' ? event.text : '')).join('');
}

function withFault(fault: GenerationFault): DeterministicModel {
  return new DeterministicModel({ models: [MODEL], fault });
}

describe('deterministicAnswer', () => {
  it('is a pure function of the whole conversation', () => {
    const again = conversation.map((message) => ({ ...message }));
    expect(deterministicAnswer(again)).toBe(deterministicAnswer(conversation));
    expect(deterministicAnswer(conversation)).toContain('What is the capital of France?');
    const otherSystem = [{ role: 'system', content: 'Be long.' }, conversation[1]!];
    expect(deterministicAnswer(otherSystem)).not.toBe(deterministicAnswer(conversation));
  });

  it('tokenizes so that the tokens concatenate back to the text', () => {
    const text = '  Hello,  wide\nworld ';
    expect(tokenize(text).join('')).toBe(text);
    expect(tokenize('a b c')).toEqual(['a', ' b', ' c']);
  });
});

describe('DeterministicModel', () => {
  it('streams the deterministic answer in chunks of the configured size', async () => {
    const model = new DeterministicModel({ models: [MODEL], tokensPerChunk: 2 });
    const { events, error } = await collect(model);
    expect(error).toBeUndefined();
    expect(textOf(events)).toBe(deterministicAnswer(conversation));
    expect(events.length).toBe(Math.ceil(tokenize(deterministicAnswer(conversation)).length / 2));
  });

  it('paces its output and stops when aborted', async () => {
    const model = new DeterministicModel({ models: [MODEL], tokensPerSecond: 20 });
    const controller = new AbortController();
    const events: GenerationEvent[] = [];
    const run = (async () => {
      for await (const event of model.generate({
        model: MODEL,
        messages: conversation,
        signal: controller.signal,
      })) {
        events.push(event);
        if (events.length === 2) controller.abort(new Error('drained'));
      }
    })();
    await expect(run).rejects.toThrow('drained');
    expect(events).toHaveLength(2);
  });

  it('fails before the first chunk', async () => {
    const { events, error } = await collect(withFault({ kind: 'fail-before-first-chunk' }));
    expect(events).toEqual([]);
    expect(error).toBeInstanceOf(ModelGenerationError);
  });

  it('fails after the configured number of chunks', async () => {
    const { events, error } = await collect(withFault({ kind: 'fail-after-chunks', chunks: 3 }));
    expect(events).toHaveLength(3);
    expect(error).toBeInstanceOf(ModelGenerationError);
  });

  it('stalls until the job is given up', async () => {
    const controller = new AbortController();
    const pending = collect(withFault({ kind: 'stall-past-deadline' }), conversation, controller.signal);
    setTimeout(() => controller.abort(new Error('deadline')), 50);
    const { events, error } = await pending;
    expect(events).toEqual([]);
    expect((error as Error).message).toBe('deadline');
  });

  it('restarts its answer with different text after chunks went out', async () => {
    const { events, error } = await collect(withFault({ kind: 'restart-after-chunks', chunks: 2 }));
    expect(error).toBeUndefined();
    const restartAt = events.findIndex((event) => event.kind === 'restart');
    expect(restartAt).toBe(2);
    expect(textOf(events.slice(restartAt + 1))).toBe(restartedDeterministicAnswer(conversation));
    expect(deterministicAnswer(conversation).startsWith(textOf(events.slice(0, restartAt)))).toBe(true);
    expect(restartedDeterministicAnswer(conversation).startsWith(textOf(events.slice(0, restartAt)))).toBe(
      false,
    );
  });

  it('asks for a mismatched commitment and still streams the answer', async () => {
    const { events, error } = await collect(withFault({ kind: 'commit-mismatched-hash' }));
    expect(error).toBeUndefined();
    expect(events[0]).toEqual({ kind: 'commit-mismatched-hash' });
    expect(textOf(events)).toBe(deterministicAnswer(conversation));
  });

  it('takes a fault from the prompt only when enabled', async () => {
    const messages = [{ role: 'user', content: 'hi #fault:fail-after-chunks=1' }];
    const enabled = new DeterministicModel({ models: [MODEL], faultsFromPrompt: true });
    const disabled = new DeterministicModel({ models: [MODEL] });
    const faulty = await collect(enabled, messages);
    expect(faulty.events).toHaveLength(1);
    expect(faulty.error).toBeInstanceOf(ModelGenerationError);
    const clean = await collect(disabled, messages);
    expect(clean.error).toBeUndefined();
    expect(textOf(clean.events)).toBe(deterministicAnswer(messages));
  });

  it('parses fault specs and refuses unknown ones', () => {
    expect(parseGenerationFault('restart-after-chunks=4')).toEqual({
      kind: 'restart-after-chunks',
      chunks: 4,
    });
    expect(parseGenerationFault('fail-after-chunks')).toEqual({ kind: 'fail-after-chunks', chunks: 2 });
    expect(parseGenerationFault('stall-past-deadline')).toEqual({ kind: 'stall-past-deadline' });
    expect(() => parseGenerationFault('explode')).toThrow(RangeError);
    expect(() => parseGenerationFault('stall-past-deadline=3')).toThrow(RangeError);
    expect(() => parseGenerationFault('fail-after-chunks=-1')).toThrow(RangeError);
  });
});
