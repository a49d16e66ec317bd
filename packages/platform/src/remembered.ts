/**
 * A read (typically from the chain) remembered for `ttlMs` and shared by the callers that ask meanwhile;
 * a failed read is not remembered, so the next caller tries again.
 */
export class Remembered<T> {
  #entry: { readonly at: number; readonly value: Promise<T> } | undefined;

  constructor(
    private readonly ttlMs: number,
    private readonly read: () => Promise<T>,
  ) {}

  get(): Promise<T> {
    if (!this.#entry || Date.now() - this.#entry.at >= this.ttlMs) {
      const value = this.read();
      const entry = { at: Date.now(), value };
      value.catch(() => {
        if (this.#entry === entry) this.#entry = undefined;
      });
      this.#entry = entry;
    }
    return this.#entry.value;
  }

  /** Drops what is remembered: the next caller reads again. */
  forget(): void {
    this.#entry = undefined;
  }
}
