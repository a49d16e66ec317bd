import { setTimeout as sleep } from 'node:timers/promises';
import { deterministicAnswer, restartedDeterministicAnswer, tokenize } from './deterministic-answer.js';
import { faultDirectiveIn, type GenerationFault } from './generation-faults.js';
import {
  ModelGenerationError,
  type GenerationEvent,
  type GenerationRequest,
  type ModelBackend,
} from './model-backend.js';

export interface DeterministicModelOptions {
  /** Model names this backend answers, e.g. `["svc-deterministic"]`. */
  readonly models: readonly string[];
  /** Pace of the output; 0 emits as fast as the consumer reads. */
  readonly tokensPerSecond?: number;
  /** Tokens per emitted text event. */
  readonly tokensPerChunk?: number;
  /** A fault applied to every generation (tests of the service's failure paths). */
  readonly fault?: GenerationFault;
  /** Lets a prompt pick its fault with `#fault:<kind>[=<chunks>]`; never enable it for real traffic. */
  readonly faultsFromPrompt?: boolean;
}

/**
 * The built-in model of the all-in-one mode and the tests: its answer is {@link deterministicAnswer}
 * of the conversation, emitted in chunks at a configurable speed, with the fault switches of
 * {@link GenerationFault}.
 */
export class DeterministicModel implements ModelBackend {
  readonly models: readonly string[];
  readonly #tokensPerSecond: number;
  readonly #tokensPerChunk: number;
  readonly #fault: GenerationFault | undefined;
  readonly #faultsFromPrompt: boolean;

  constructor(options: DeterministicModelOptions) {
    if (options.models.length === 0) throw new RangeError('the deterministic model needs a model name');
    const tokensPerSecond = options.tokensPerSecond ?? 0;
    const tokensPerChunk = options.tokensPerChunk ?? 1;
    if (!(tokensPerSecond >= 0)) throw new RangeError('tokensPerSecond must be 0 or more');
    if (!Number.isInteger(tokensPerChunk) || tokensPerChunk < 1) {
      throw new RangeError('tokensPerChunk must be a whole number of at least 1');
    }
    this.models = [...options.models];
    this.#tokensPerSecond = tokensPerSecond;
    this.#tokensPerChunk = tokensPerChunk;
    this.#fault = options.fault;
    this.#faultsFromPrompt = options.faultsFromPrompt ?? false;
  }

  async *generate(request: GenerationRequest): AsyncIterable<GenerationEvent> {
    const { signal } = request;
    signal.throwIfAborted();
    const fault = this.#faultFor(request);
    if (fault?.kind === 'fail-before-first-chunk') {
      throw new ModelGenerationError('deterministic model fault: failed before the first chunk');
    }
    if (fault?.kind === 'stall-past-deadline') {
      // Holds the job until the worker gives up on it; only the abort ends the stall.
      await new Promise<never>((_, reject) => {
        const onAbort = (): void => reject(signal.reason);
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
      });
    }
    if (fault?.kind === 'commit-mismatched-hash') yield { kind: 'commit-mismatched-hash' };

    const chunks = this.#chunksOf(deterministicAnswer(request.messages));
    let emitted = 0;
    for (const chunk of chunks) {
      if (fault?.kind === 'fail-after-chunks' && emitted === fault.chunks) {
        throw new ModelGenerationError(`deterministic model fault: failed after ${emitted} chunks`);
      }
      if (fault?.kind === 'restart-after-chunks' && emitted === fault.chunks) {
        yield { kind: 'restart' };
        for (const again of this.#chunksOf(restartedDeterministicAnswer(request.messages))) {
          await this.#pace(signal);
          yield { kind: 'text', text: again };
        }
        return;
      }
      await this.#pace(signal);
      yield { kind: 'text', text: chunk };
      emitted += 1;
    }
  }

  #faultFor(request: GenerationRequest): GenerationFault | undefined {
    if (this.#faultsFromPrompt) {
      const lastUser = [...request.messages].reverse().find((message) => message.role === 'user');
      const requested = lastUser ? faultDirectiveIn(lastUser.content) : undefined;
      if (requested) return requested;
    }
    return this.#fault;
  }

  #chunksOf(text: string): string[] {
    const tokens = tokenize(text);
    const chunks: string[] = [];
    for (let start = 0; start < tokens.length; start += this.#tokensPerChunk) {
      chunks.push(tokens.slice(start, start + this.#tokensPerChunk).join(''));
    }
    return chunks;
  }

  async #pace(signal: AbortSignal): Promise<void> {
    if (this.#tokensPerSecond === 0) {
      signal.throwIfAborted();
      return;
    }
    try {
      await sleep((1000 * this.#tokensPerChunk) / this.#tokensPerSecond, undefined, { signal });
    } catch (error) {
      // Surface why the job was given up (deadline, drain), not the timer's generic AbortError.
      throw signal.aborted ? signal.reason : error;
    }
  }
}
