import { AsyncLocalStorage } from 'node:async_hooks';

/** What every log line and outgoing call made while serving one request should carry. */
export interface RequestContext {
  readonly requestId: string;
}

const storage = new AsyncLocalStorage<RequestContext>();

export function withRequestContext<T>(context: RequestContext, run: () => T): T {
  return storage.run(context, run);
}

export function currentRequestContext(): RequestContext | undefined {
  return storage.getStore();
}

export function currentRequestId(): string | undefined {
  return storage.getStore()?.requestId;
}
