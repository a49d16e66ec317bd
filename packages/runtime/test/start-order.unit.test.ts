import { describe, expect, it } from '@jest/globals';
import { ConfigError, createLogger, env } from '@svc/platform';
import { defineModule, runTarget, type PeerListener, type ServiceModule, type Unit } from '../src/index.js';

// A target's units start in the order their peers give, never the order they are listed in: each after
// the units of the peers it names that run in the same process, and they stop in reverse. A cycle of
// peers, or a peer naming no service, is a configuration error before anything is built or started.

const logger = createLogger({ service: 'start-order-test', level: 'silent' });
const options = { env: {}, logger };

/**
 * A module that needs no shared dependency, names `peers` by settings of its own (`<PEER>_ADDRESS`),
 * records when it is built, started and stopped, and binds a listener named `side` in `start`.
 */
function recorder(
  name: string,
  events: string[],
  peers: Readonly<Record<string, string | PeerListener>> = {},
): ServiceModule {
  const configShape = Object.fromEntries(
    Object.keys(peers).map((setting) => [setting, env.optionalString({ doc: `the peer of ${setting}` })]),
  );
  return defineModule({
    name,
    configShape,
    needs: [],
    peers,
    build: (config, { logger: unitLogger }) => {
      const unit = (unitLogger.bindings().unit as string | undefined) ?? name;
      const settings = Object.entries(config as Record<string, string | undefined>)
        .map(([setting, value]) => ` ${setting}=${value ?? 'unset'}`)
        .join('');
      events.push(`${unit} built${settings}`);
      let side: string | undefined;
      return {
        get listeners() {
          return { side };
        },
        start: async () => {
          side = `${unit}.local:1`;
          events.push(`${unit} started`);
        },
        stop: async () => {
          events.push(`${unit} stopped`);
        },
      };
    },
  });
}

describe('the start order of a target', () => {
  it('starts each module after the peers it names, whatever order they are listed in, and stops them in reverse', async () => {
    const events: string[] = [];
    const gateway = recorder('gateway', events, { KEYS_ADDRESS: 'keys', JOBS_ADDRESS: 'jobs' });
    const jobs = recorder('jobs', events, { PAYMENTS_ADDRESS: 'payments' });
    const keys = recorder('keys', events);
    const payments = recorder('payments', events);
    const running = await runTarget(
      { name: 'listed-backwards', modules: [gateway, jobs, keys, payments] },
      options,
    );
    // Otherwise in the order listed: keys names no peer, so it need not wait for jobs.
    expect([...running.instances.keys()]).toEqual(['keys', 'payments', 'jobs', 'gateway']);
    await running.stop();
    expect(events).toEqual([
      'keys built',
      'keys started',
      'payments built',
      'payments started',
      'jobs built PAYMENTS_ADDRESS=unset',
      'jobs started',
      'gateway built KEYS_ADDRESS=unset JOBS_ADDRESS=unset',
      'gateway started',
      'gateway stopped',
      'jobs stopped',
      'payments stopped',
      'keys stopped',
    ]);
  });

  it("builds a unit that names a peer's listener once that peer started, however the units are listed", async () => {
    const events: string[] = [];
    const link = { LINK: { target: 'orchestrator', listener: 'side' } } as const;
    const worker = recorder('worker', events, link);
    const orchestrator = recorder('orchestrator', events);
    const units = (): Unit[] => [
      { module: worker, name: 'worker-1' },
      { module: worker, name: 'worker-2' },
      { module: orchestrator },
    ];
    const running = await runTarget(
      { name: 'workers-first', modules: [worker, orchestrator], units },
      options,
    );
    await running.stop();
    expect(events).toEqual([
      'orchestrator built',
      'orchestrator started',
      'worker-1 built LINK=orchestrator.local:1',
      'worker-1 started',
      'worker-2 built LINK=orchestrator.local:1',
      'worker-2 started',
      'worker-2 stopped',
      'worker-1 stopped',
      'orchestrator stopped',
    ]);
  });

  it('refuses a cycle of peers before anything is built or started, naming the settings that close it', async () => {
    const events: string[] = [];
    const first = recorder('first', events, { SECOND_ADDRESS: 'second' });
    const second = recorder('second', events, { THIRD_ADDRESS: 'third' });
    const third = recorder('third', events, { FIRST_LINK: { target: 'first', listener: 'side' } });
    const refusal = await runTarget({ name: 'cycle', modules: [first, second, third] }, options).catch(
      (error: unknown) => error,
    );
    expect(refusal).toBeInstanceOf(ConfigError);
    expect((refusal as ConfigError).problems).toEqual([
      'peers name each other in a cycle, so none of them can start first: first (SECOND_ADDRESS) → second (THIRD_ADDRESS) → third (FIRST_LINK) → first',
    ]);
    expect(events).toEqual([]);
  });

  it('refuses a module that names itself as its peer', async () => {
    const events: string[] = [];
    const selfish = recorder('selfish', events, { SELF_ADDRESS: 'selfish' });
    await expect(runTarget({ name: 'selfish', modules: [selfish] }, options)).rejects.toThrow(
      'peers name each other in a cycle, so none of them can start first: selfish (SELF_ADDRESS) → selfish',
    );
    expect(events).toEqual([]);
  });

  it('refuses a peer naming no service of the deployment before anything starts; a known one that runs elsewhere is fine', async () => {
    const events: string[] = [];
    const typo = recorder('gateway', events, { KEYS_ADDRESS: 'keys', JOBS_ADDRESS: 'jbos' });
    const services = ['gateway', 'keys', 'jobs'];
    await expect(runTarget({ name: 'typo', modules: [typo], services }, options)).rejects.toThrow(
      'gateway: JOBS_ADDRESS names the peer "jbos", which is no service (the services: gateway, keys, jobs)',
    );
    expect(events).toEqual([]);
    // Without the deployment's services, a peer that does not run here is taken to run elsewhere.
    await (await runTarget({ name: 'alone', modules: [typo] }, options)).stop();
    expect(events).toEqual([
      'gateway built KEYS_ADDRESS=unset JOBS_ADDRESS=unset',
      'gateway started',
      'gateway stopped',
    ]);
  });

  it('refuses a unit naming a listener of a module of the target that has no instance, before anything starts', async () => {
    const events: string[] = [];
    const worker = recorder('worker', events, { LINK: { target: 'orchestrator', listener: 'side' } });
    const orchestrator = recorder('orchestrator', events);
    const units = (): Unit[] => [{ module: worker }];
    await expect(
      runTarget({ name: 'no-orchestrator', modules: [worker, orchestrator], units }, options),
    ).rejects.toThrow(
      'worker: LINK names a listener of orchestrator, which this process runs no instance of',
    );
    expect(events).toEqual([]);
  });
});
