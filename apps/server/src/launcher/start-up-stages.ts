/**
 * The stages `npm start` shows while the all-in-one target comes up, each finished by a log message of
 * the server (the messages are the runner's and the services' own start-up lines).
 */
export interface Stage {
  readonly title: string;
  /** Whether this log line finishes the stage. */
  readonly finishedBy: (line: LogLine) => boolean;
}

export interface LogLine {
  readonly level?: number | string;
  readonly service?: string;
  readonly msg?: string;
  readonly [field: string]: unknown;
}

const message =
  (...messages: string[]) =>
  (line: LogLine) =>
    messages.includes(line.msg ?? '');

export const START_UP_STAGES: readonly Stage[] = [
  {
    title: 'Chain: the anvil devnet with JobRegistry and WorkerRegistry',
    finishedBy: message(
      'devnet deployed',
      'devnet resumed from its kept state',
      'using the chain at RPC_URL',
    ),
  },
  { title: 'Database, store and event bus', finishedBy: message('database migrations checked') },
  {
    title: 'Services: key-service, payment-settler, job-orchestrator, gateway',
    finishedBy: message('gateway listening'),
  },
  { title: 'Workers: registered on chain and linked', finishedBy: message('all started') },
];

/** The stage each log line reaches: stages finish in order, and a later one finishes every earlier one. */
export class StartUpProgress {
  private finished = 0;

  constructor(private readonly stages: readonly Stage[] = START_UP_STAGES) {}

  /** The stages this line finishes (in order), possibly none. */
  advance(line: LogLine): Stage[] {
    const index = this.stages.findIndex((stage, at) => at >= this.finished && stage.finishedBy(line));
    if (index < 0) return [];
    const done = this.stages.slice(this.finished, index + 1);
    this.finished = index + 1;
    return done;
  }

  get current(): Stage | undefined {
    return this.stages[this.finished];
  }

  get complete(): boolean {
    return this.finished === this.stages.length;
  }
}
