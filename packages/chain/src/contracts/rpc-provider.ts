import { JsonRpcProvider, type JsonRpcPayload, type JsonRpcResult } from 'ethers';

const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder();

/**
 * ethers' JsonRpcProvider with the request and response bodies encoded by the runtime's UTF-8 codec
 * instead of ethers' own, which walks a string one code point at a time in JavaScript: a blob
 * transaction's `eth_sendRawTransaction` and a blob fetch each carry 256 KiB of hex, and under load that
 * walk alone took about a tenth of the all-in-one server's main thread (measured with `--cpu-prof` under
 * `npm run bench:load -w @svc/e2e`). Everything else (the connection, its headers, retries, errors) is
 * ethers' own `_send`, which ethers documents as the transport a sub-class may override.
 */
export class RpcProvider extends JsonRpcProvider {
  // Typed as ethers types it: an error answer is passed on as ethers' own `_send` passes it.
  override async _send(payload: JsonRpcPayload | JsonRpcPayload[]): Promise<JsonRpcResult[]> {
    const request = this._getConnection();
    request.body = utf8Encoder.encode(JSON.stringify(payload));
    request.setHeader('content-type', 'application/json');
    const response = await request.send();
    response.assertOk();
    const body = response.body === null ? 'null' : utf8Decoder.decode(response.body);
    const parsed = JSON.parse(body) as JsonRpcResult | JsonRpcResult[];
    return Array.isArray(parsed) ? parsed : [parsed];
  }
}
