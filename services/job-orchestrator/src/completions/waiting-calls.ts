/**
 * The calls on this replica whose callers are still waiting for their answer: how busy the replica is.
 * A batch of submissions lingers for more jobs only while enough of them wait (`SUBMIT_BATCH_LINGER`,
 * docs/protocol.md, Batches), so a call on a quiet service is never held for company that is not coming.
 * A run that goes on after its caller has the answer (the signed final's commitment awaited) no longer
 * counts: a caller calling back to back is one call, however long its earlier runs take to settle.
 */
export class WaitingCalls {
  #count = 0;

  get count(): number {
    return this.#count;
  }

  /** Counts a call from now; the returned function stops counting it (once, however often it is called). */
  begin(): () => void {
    this.#count += 1;
    let counted = true;
    return () => {
      if (!counted) return;
      counted = false;
      this.#count -= 1;
    };
  }
}
