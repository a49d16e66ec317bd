import { ConfigError } from '@svc/platform';
import type { PeerListener, ServiceModule } from './module.js';

/** The target a peer setting names, whether it names the peer's gRPC address or one of its listeners. */
export function peerTarget(peer: string | PeerListener): string {
  return typeof peer === 'string' ? peer : peer.target;
}

/**
 * Checks the peers of a target's modules, before anything is opened or started: each names a service
 * the target knows (its own modules, and every service of `services` when it lists them), and those
 * that run in this process name each other in no cycle (each would have to start before the other).
 * Throws a ConfigError naming every problem.
 */
export function checkPeers(modules: readonly ServiceModule[], services?: readonly string[]): void {
  const local = new Map(modules.map((module) => [module.name, module]));
  const known = new Set([...(services ?? []), ...local.keys()]);
  const problems: string[] = [];
  if (services) {
    for (const module of local.values())
      for (const [setting, peer] of Object.entries(module.peers ?? {}))
        if (!known.has(peerTarget(peer)))
          problems.push(
            `${module.name}: ${setting} names the peer "${peerTarget(peer)}", which is no service (the services: ${[...known].join(', ')})`,
          );
  }
  const cycle = findCycle(local);
  if (cycle)
    problems.push(
      `peers name each other in a cycle, so none of them can start first: ${describeCycle(cycle)}`,
    );
  if (problems.length > 0) throw new ConfigError(problems);
}

type Edge = { readonly from: string; readonly setting: string; readonly to: string };

/** A cycle of peers among the modules that run here, as its edges, or undefined. */
function findCycle(local: ReadonlyMap<string, ServiceModule>): Edge[] | undefined {
  const done = new Set<string>();
  const path: Edge[] = [];
  const onPath = new Set<string>();
  const visit = (name: string): Edge[] | undefined => {
    if (done.has(name)) return undefined;
    onPath.add(name);
    for (const [setting, peer] of Object.entries(local.get(name)?.peers ?? {})) {
      const to = peerTarget(peer);
      if (!local.has(to)) continue;
      path.push({ from: name, setting, to });
      if (onPath.has(to)) return path.slice(path.findIndex((edge) => edge.from === to));
      const cycle = visit(to);
      if (cycle) return cycle;
      path.pop();
    }
    onPath.delete(name);
    done.add(name);
    return undefined;
  };
  for (const name of local.keys()) {
    const cycle = visit(name);
    if (cycle) return cycle;
  }
  return undefined;
}

/** `a (B_ADDRESS) → b (A_ADDRESS) → a`: each module and the setting that names the next. */
function describeCycle(cycle: readonly Edge[]): string {
  return [...cycle.map(({ from, setting }) => `${from} (${setting})`), cycle[0]!.from].join(' → ');
}

/**
 * The order in which units start: each after every unit of the peers it names that run in this process
 * (`local`: the target's modules by name), and otherwise in the order given. Stopping is the reverse.
 */
export function startOrder<U extends { readonly module: ServiceModule; readonly name?: string }>(
  units: readonly U[],
  local: ReadonlySet<string>,
): U[] {
  const after = units.map((unit) => {
    const peers = new Set(
      Object.values(unit.module.peers ?? {})
        .map(peerTarget)
        .filter((peer) => local.has(peer)),
    );
    return new Set(
      units.flatMap((other, index) => (other !== unit && peers.has(other.module.name) ? [index] : [])),
    );
  });
  const order: number[] = [];
  const placed = new Set<number>();
  while (order.length < units.length) {
    // The first unit, in the order given, whose peers have all started before it.
    const next = units.findIndex(
      (_unit, index) => !placed.has(index) && [...after[index]!].every((peer) => placed.has(peer)),
    );
    if (next < 0) {
      const waiting = units
        .filter((_unit, index) => !placed.has(index))
        .map((unit) => unit.name ?? unit.module.name);
      throw new ConfigError([
        `peers name each other in a cycle, so none of ${waiting.join(', ')} can start first`,
      ]);
    }
    order.push(next);
    placed.add(next);
  }
  return order.map((index) => units[index]!);
}
