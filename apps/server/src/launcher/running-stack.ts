import { readFileSync } from 'node:fs';

/**
 * The gateway of a stack that still runs on this state directory: its `stack.json` is there (a clean
 * stop removes it) and its gateway answers. A file left by a crash names a gateway that is gone.
 */
export async function runningStackAt(stackPath: string): Promise<string | undefined> {
  let gatewayUrl: string;
  try {
    gatewayUrl = (JSON.parse(readFileSync(stackPath, 'utf8')) as { gatewayUrl: string }).gatewayUrl;
  } catch {
    return undefined;
  }
  try {
    const response = await fetch(`${gatewayUrl}/healthz`, { signal: AbortSignal.timeout(1_000) });
    return response.ok ? gatewayUrl : undefined;
  } catch {
    return undefined;
  }
}
