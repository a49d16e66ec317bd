import { request } from 'node:http';

// Far longer than any answer takes; a request left hanging fails its test instead of the test's timeout.
const ANSWER_TIMEOUT_MS = 10_000;

export interface RawRequest {
  readonly method: string;
  /** Sent verbatim: no normalisation, no percent-encoding (unlike fetch's URL parsing). */
  readonly path: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: Buffer | string;
}

export interface RawAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly text: string;
}

/** One HTTP/1.1 request over node:http, so a test controls the path, the headers and the body bytes exactly. */
export function sendRaw(baseUrl: string, raw: RawRequest): Promise<RawAnswer> {
  const { hostname, port } = new URL(baseUrl);
  // node:http sends a DELETE or GET body with neither a length nor chunking unless told its length.
  const headers =
    raw.body === undefined
      ? raw.headers
      : { 'content-length': String(Buffer.byteLength(raw.body)), ...raw.headers };
  return new Promise((resolve, reject) => {
    const outgoing = request(
      { host: hostname, port, method: raw.method, path: raw.path, headers, agent: false },
      (incoming) => {
        const chunks: Buffer[] = [];
        incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
        incoming.on('error', reject);
        incoming.on('end', () =>
          resolve({
            status: incoming.statusCode ?? 0,
            headers: incoming.headers,
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
      },
    );
    outgoing.on('error', reject);
    outgoing.setTimeout(ANSWER_TIMEOUT_MS, () =>
      outgoing.destroy(new Error(`no answer to ${raw.method} ${raw.path} within ${ANSWER_TIMEOUT_MS} ms`)),
    );
    outgoing.end(raw.body);
  });
}
