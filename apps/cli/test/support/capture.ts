import { Writable } from 'node:stream';

/** A stream that keeps what is written to it, to read back as one string. */
export class Capture extends Writable {
  private readonly chunks: string[] = [];

  constructor(readonly isTTY = false) {
    super();
  }

  override _write(chunk: unknown, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    this.chunks.push(String(chunk));
    done();
  }

  get text(): string {
    return this.chunks.join('');
  }
}
