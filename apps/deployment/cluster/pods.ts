// Pods as local processes: each replica runs the image's entry point with its container's arguments and
// environment, its container ports mapped to free local ports, its volumes to directories of its own; a
// Service is a TCP proxy on a local port spreading connections round-robin over its ready replicas.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { freePort } from '@svc/testkit/ports';
import type { RenderedChart, Service, Workload } from './chart-pods.js';
import { imageEntrypoint, repoRoot, workloadOf } from './chart-pods.js';

/** Settings that name the port a container listens on; each must equal one of its declared ports. */
const PORT_SETTINGS = ['PORT', 'GRPC_PORT', 'WORKER_LINK_PORT', 'METRICS_PORT', 'HEALTH_PORT'];
const HOST_SETTINGS = ['HTTP_HOST', 'GRPC_HOST', 'WORKER_LINK_HOST', 'METRICS_HOST', 'HEALTH_HOST'];

export interface LogLine {
  readonly pod: string;
  readonly at: number;
  readonly level: number;
  readonly msg: string;
  readonly raw: string;
}

/** One replica: a process that the owning workload replaces when it dies (restartPolicy Always). */
export class Pod {
  child?: ChildProcess;
  /** Local port of each container port, by the port's name. */
  readonly ports: Record<string, number> = {};
  ready = false;
  startedAt = 0;
  restarts = 0;
  /** False once the suite deleted it: it is no longer restarted and leaves its Services. */
  live = true;
  private log?: WriteStream;
  exited?: Promise<number | null>;

  constructor(
    readonly workload: Workload,
    readonly name: string,
    readonly env: Record<string, string>,
    readonly dir: string,
    private readonly cluster: LocalCluster,
  ) {}

  start(): void {
    const [command, ...entryArgs] = imageEntrypoint();
    this.log ??= createWriteStream(join(this.dir, 'log.jsonl'), { flags: 'a' });
    this.ready = false;
    this.startedAt = Date.now();
    const child = spawn(command!, [...entryArgs, ...this.workload.args], {
      cwd: this.dir,
      env: this.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    let rest = '';
    const onData = (chunk: Buffer) => {
      this.log?.write(chunk);
      rest += chunk.toString();
      const lines = rest.split('\n');
      rest = lines.pop() ?? '';
      for (const raw of lines) this.cluster.onLogLine(this, raw);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.ready = false;
        this.cluster.onExit(this, code, signal);
        resolve(code);
      }),
    );
  }

  get running(): boolean {
    return !!this.child && this.child.exitCode === null && this.child.signalCode === null;
  }

  kill(signal: NodeJS.Signals): void {
    if (this.running) this.child!.kill(signal);
  }

  /** Deletes the pod: SIGTERM, SIGKILL after `graceMs`; resolves once it exited. */
  async terminate(graceMs: number): Promise<void> {
    this.live = false;
    this.ready = false;
    if (!this.running) return;
    const timer = setTimeout(() => this.kill('SIGKILL'), graceMs);
    this.kill('SIGTERM');
    await this.exited;
    clearTimeout(timer);
  }

  closeLog(): void {
    this.log?.end();
  }
}

/** A Service: a local listener per port, each connection sent to the next ready replica. */
class ServiceProxy {
  private next = 0;
  readonly connections = new Map<string, number>();
  private readonly servers: Server[] = [];
  private readonly sockets = new Set<Socket>();

  constructor(
    readonly service: Service,
    private readonly pods: () => Pod[],
  ) {}

  async listen(servicePort: number, localPort: number, targetPortName: string): Promise<void> {
    // Half-open both ways: a FIN one side sends reaches the other as it would without a proxy in between.
    const server = createServer({ allowHalfOpen: true }, (client) => this.forward(client, targetPortName));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(localPort, '127.0.0.1', resolve);
    });
    this.servers.push(server);
    void servicePort;
  }

  private forward(client: Socket, portName: string): void {
    this.sockets.add(client);
    client.once('close', () => this.sockets.delete(client));
    const tryNext = (attemptsLeft: number) => {
      const ready = this.pods().filter((pod) => pod.live && pod.ready && pod.ports[portName] !== undefined);
      if (ready.length === 0 || attemptsLeft === 0) {
        client.destroy();
        return;
      }
      const pod = ready[this.next++ % ready.length]!;
      const upstream = connect({ port: pod.ports[portName]!, host: '127.0.0.1', allowHalfOpen: true });
      let connected = false;
      upstream.once('connect', () => {
        connected = true;
        this.connections.set(pod.name, (this.connections.get(pod.name) ?? 0) + 1);
        client.pipe(upstream);
        upstream.pipe(client);
      });
      upstream.on('error', () => {
        if (!connected) tryNext(attemptsLeft - 1);
        else client.destroy();
      });
      client.on('error', () => upstream.destroy());
      upstream.once('close', () => {
        if (connected) client.destroy();
      });
      client.once('close', () => upstream.destroy());
      this.sockets.add(upstream);
      upstream.once('close', () => this.sockets.delete(upstream));
    };
    // Paused until an upstream is connected: pipe() resumes it, so no byte is read before it has a reader.
    client.pause();
    tryNext(3);
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await Promise.all(this.servers.map((server) => new Promise((resolve) => server.close(resolve))));
  }
}

export interface ClusterOptions {
  readonly runDir: string;
  /** What every process gets beside its container's environment (PATH, HOME, …). */
  readonly baseEnv: Record<string, string>;
}

/** The rendered chart running on this machine. */
export class LocalCluster {
  readonly pods = new Map<string, Pod[]>();
  readonly logLines: LogLine[] = [];
  readonly proxies: ServiceProxy[] = [];
  /** `host:port` of each Service port as the chart names it, to the local proxy's `127.0.0.1:port`. */
  readonly addresses = new Map<string, string>();
  /** Called for every log line of every pod (the suite waits for lines, funds new workers). */
  onLine: (pod: Pod, line: LogLine) => void = () => {};
  private podCounter = 0;
  private readonly healthProbes = new Map<number, HealthProbe>();
  private stopping = false;

  constructor(
    readonly chart: RenderedChart,
    private readonly options: ClusterOptions,
  ) {}

  /** Listens on a local port for every port of every Service; call before any pod starts. */
  async openServices(): Promise<void> {
    for (const service of this.chart.services) {
      const workload = workloadOf(this.chart, service);
      const proxy = new ServiceProxy(service, () => this.pods.get(workload.name) ?? []);
      for (const port of service.ports) {
        const targetName =
          typeof port.targetPort === 'string'
            ? port.targetPort
            : Object.entries(workload.ports).find(([, number]) => number === port.targetPort)?.[0];
        if (!targetName || workload.ports[targetName] === undefined)
          throw new Error(
            `Service ${service.name} port ${port.port} targets ${port.targetPort}, which ${workload.name} does not declare`,
          );
        const local = await freePort();
        await proxy.listen(port.port, local, targetName);
        const ns = this.chart.namespace;
        for (const host of [
          service.name,
          `${service.name}.${ns}`,
          `${service.name}.${ns}.svc`,
          `${service.name}.${ns}.svc.cluster.local`,
        ])
          this.addresses.set(`${host}:${port.port}`, `127.0.0.1:${local}`);
      }
      this.proxies.push(proxy);
    }
  }

  /** The local address of a Service port. */
  address(serviceName: string, port: number): string {
    const address = this.addresses.get(`${serviceName}:${port}`);
    if (!address) throw new Error(`no Service ${serviceName} with port ${port}`);
    return address;
  }

  proxyOf(serviceName: string): ServiceProxy | undefined {
    return this.proxies.find((proxy) => proxy.service.name === serviceName);
  }

  workload(name: string): Workload {
    const workload = this.chart.workloads.find((candidate) => candidate.name === name);
    if (!workload) throw new Error(`no workload ${name} rendered`);
    return workload;
  }

  /** A new replica of `workload` (a new pod name, or `fixedName` for a StatefulSet ordinal), started. */
  async addPod(workload: Workload, fixedName?: string): Promise<Pod> {
    const name = fixedName ?? `${workload.name}-${(++this.podCounter).toString(36)}`;
    const dir = join(this.options.runDir, 'pods', name);
    mkdirSync(dir, { recursive: true });
    const env: Record<string, string> = { ...this.options.baseEnv };
    const ports: Record<string, number> = {};
    const portsByNumber = new Map<number, string>();
    for (const [portName, number] of Object.entries(workload.ports)) {
      ports[portName] = await freePort();
      portsByNumber.set(number, portName);
    }
    for (const [key, rawValue] of Object.entries(workload.env)) {
      let value = rawValue;
      if (PORT_SETTINGS.includes(key)) {
        const portName = portsByNumber.get(Number(value));
        if (portName === undefined)
          throw new Error(`${workload.name}: ${key}=${value} is none of the container's declared ports`);
        value = String(ports[portName]);
      } else if (HOST_SETTINGS.includes(key)) value = '127.0.0.1';
      else value = this.mapAddresses(value);
      for (const mount of workload.mountPaths)
        if (value === mount || value.startsWith(`${mount}/`)) value = join(dir, 'volumes', value);
      env[key] = value;
    }
    for (const mount of workload.mountPaths) mkdirSync(join(dir, 'volumes', mount), { recursive: true });
    const pod = new Pod(workload, name, env, dir, this);
    Object.assign(pod.ports, ports);
    const list = this.pods.get(workload.name) ?? [];
    list.push(pod);
    this.pods.set(workload.name, list);
    pod.start();
    return pod;
  }

  /** Every Service address in a setting (`host:port`, comma-separated lists, `tls://`) to its proxy. */
  private mapAddresses(value: string): string {
    return value.replace(/[a-z0-9.-]+:[0-9]{1,5}/g, (match) => this.addresses.get(match) ?? match);
  }

  onLogLine(pod: Pod, raw: string): void {
    let level: number;
    let msg = raw;
    try {
      const parsed = JSON.parse(raw) as { level?: number | string; msg?: string };
      level = typeof parsed.level === 'number' ? parsed.level : levelNumber(parsed.level);
      msg = parsed.msg ?? '';
    } catch {
      level = raw.trim() ? 40 : 0; // not JSON: anything on stderr a crash prints
    }
    if (level === 0) return;
    const line = { pod: pod.name, at: Date.now(), level, msg, raw };
    if (level >= 40) this.logLines.push(line);
    this.onLine(pod, line);
  }

  onExit(pod: Pod, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.stopping || !pod.live || pod.workload.kind === 'Job') return;
    // restartPolicy Always, with a short back-off.
    pod.restarts += 1;
    this.logLines.push({
      pod: pod.name,
      at: Date.now(),
      level: 45,
      msg: `container exited (code ${code}, signal ${signal}); restarting`,
      raw: '',
    });
    setTimeout(() => {
      if (!this.stopping && pod.live) pod.start();
    }, 500);
  }

  /** Marks ready the pods that answer their readiness check; runs until stopped. */
  async probeLoop(): Promise<void> {
    while (!this.stopping) {
      await Promise.all([...this.pods.values()].flat().map((pod) => this.probe(pod)));
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
  }

  private async probe(pod: Pod): Promise<void> {
    if (!pod.running || !pod.live) {
      pod.ready = false;
      return;
    }
    const path = pod.workload.readinessHttpPath;
    if (path) {
      const port = pod.ports.http ?? pod.ports.metrics;
      try {
        const response = await fetch(`http://127.0.0.1:${port}${path}`, {
          signal: AbortSignal.timeout(2000),
        });
        await response.arrayBuffer();
        pod.ready = response.status === 200;
      } catch {
        pod.ready = false;
      }
      return;
    }
    // gRPC workloads are asked as the kubelet asks them: grpc.health.v1 Check on the probe's port. The
    // runner binds that port before its modules add their services, so a port that takes connections is
    // not yet one that serves them.
    const grpcProbe = pod.workload.readinessGrpc;
    if (grpcProbe) {
      const name = Object.keys(pod.workload.ports).find((key) => pod.workload.ports[key] === grpcProbe.port);
      const port = name === undefined ? undefined : pod.ports[name];
      pod.ready = port !== undefined && (await this.healthOf(port).isServing(grpcProbe.service));
      return;
    }
    // No readiness probe: ready once every declared port accepts connections.
    const results = await Promise.all(Object.values(pod.ports).map((port) => canConnect(port)));
    pod.ready = results.every(Boolean);
  }

  /** One health client a local port, kept across probes (its channel reconnects to a restarted pod). */
  private healthOf(port: number): HealthProbe {
    let probe = this.healthProbes.get(port);
    if (!probe) {
      probe = new HealthProbe(port);
      this.healthProbes.set(port, probe);
    }
    return probe;
  }

  async stopAll(graceMs: number): Promise<void> {
    this.stopping = true;
    await Promise.all(
      [...this.pods.values()].flat().map(async (pod) => {
        await pod.terminate(graceMs);
        pod.closeLog();
      }),
    );
    await Promise.all(this.proxies.map((proxy) => proxy.close()));
    for (const probe of this.healthProbes.values()) probe.close();
  }
}

type HealthClient = grpc.Client & {
  check(
    request: { service: string },
    options: grpc.CallOptions,
    callback: (error: grpc.ServiceError | null, response?: { status: string }) => void,
  ): void;
};
const HealthClient = grpc.makeGenericClientConstructor(healthService, 'grpc.health.v1.Health');

/** grpc.health.v1 Check against a pod's local port, as a Kubernetes gRPC readiness probe does. */
class HealthProbe {
  private readonly client: HealthClient;

  constructor(port: number) {
    this.client = new HealthClient(
      `127.0.0.1:${port}`,
      grpc.credentials.createInsecure(),
    ) as unknown as HealthClient;
  }

  /** True when `service` ('' for the whole server) answers SERVING within 2 s. */
  isServing(service: string): Promise<boolean> {
    return new Promise((resolve) =>
      this.client.check({ service }, { deadline: Date.now() + 2000 }, (error, response) =>
        resolve(!error && response?.status === 'SERVING'),
      ),
    );
  }

  close(): void {
    this.client.close();
  }
}

function levelNumber(level: string | undefined): number {
  return { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 }[level ?? 'info'] ?? 30;
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.setTimeout(1000, () => {
      socket.destroy();
      resolve(false);
    });
  });
}

export { repoRoot };
