import { createServer } from 'node:net';

// Ports below the kernel's ephemeral range (32768 and up on Linux), so that no listener on port 0 and no
// outgoing connection of a suite running alongside takes one between this check and the process that
// binds it (the e2e walk failed CI once with EADDRINUSE on a port handed out from the ephemeral range).
// Each process starts at a random place in the range and never hands a port out twice.
const FIRST_PORT = 20_000;
const PAST_LAST_PORT = 32_000;
let nextPort = FIRST_PORT + Math.floor(Math.random() * (PAST_LAST_PORT - FIRST_PORT));

/** A TCP port no process holds right now, for a process that must be told its port up front. */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = nextPort++;
    if (nextPort >= PAST_LAST_PORT) nextPort = FIRST_PORT;
    // Bound on every address, as the gateway binds it: a listener on any one of them makes it taken.
    const server = createServer();
    const bound = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(port, () => resolve(true));
    });
    if (!bound) continue;
    await new Promise((resolve) => server.close(resolve));
    return port;
  }
}
