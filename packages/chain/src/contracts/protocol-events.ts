import type { Log } from 'ethers';
import {
  fromParametersStruct,
  jobRegistryInterface,
  workerRegistryInterface,
  type ParametersStructOutput,
  type ProtocolParameters,
  type jobRegistryAbi,
  type workerRegistryAbi,
} from '@svc/contracts';

interface AbiParameter {
  readonly name: string;
  readonly type: string;
}
interface AbiEvent {
  readonly type: 'event';
  readonly name: string;
  readonly inputs: readonly AbiParameter[];
}

type SolidityValue<T extends string> = T extends `${infer Element}[]`
  ? SolidityValue<Element>[]
  : T extends `uint${string}` | `int${string}`
    ? bigint
    : T extends 'bool'
      ? boolean
      : T extends 'tuple'
        ? Record<string, unknown>
        : string;
type EventArgs<E extends AbiEvent> = { [P in E['inputs'][number] as P['name']]: SolidityValue<P['type']> };
type EventsOf<Abi extends readonly unknown[]> = Extract<Abi[number], { type: 'event' }>;
type DecodedEvent<E> = E extends AbiEvent ? { name: E['name']; args: EventArgs<E> } : never;

type AbiDecodedEvent =
  | DecodedEvent<Exclude<EventsOf<typeof jobRegistryAbi>, { name: 'ParametersSet' }>>
  | DecodedEvent<EventsOf<typeof workerRegistryAbi>>;

/** Where a decoded event sits on chain, so followers can store a cursor and deduplicate. */
export interface LogPosition {
  readonly address: string;
  readonly blockNumber: number;
  readonly blockHash: string;
  readonly transactionHash: string;
  readonly logIndex: number;
}

/**
 * An event of JobRegistry or WorkerRegistry, decoded: `switch (event.name)` narrows `args`, whose
 * fields carry the ABI's names with uints as bigint. ParametersSet carries the mapped parameters.
 */
export type ProtocolEvent = (
  AbiDecodedEvent | { name: 'ParametersSet'; args: { parameters: ProtocolParameters } }
) &
  LogPosition;

export type ProtocolEventName = ProtocolEvent['name'];
export type ProtocolEventOf<N extends ProtocolEventName> = Extract<ProtocolEvent, { name: N }>;

/** Decodes one log of either contract; undefined for a log neither ABI knows (or from another address). */
export function decodeProtocolLog(
  log: Log,
  addresses?: { jobRegistry: string; workerRegistry: string },
): ProtocolEvent | undefined {
  const emitter = log.address.toLowerCase();
  const candidates = addresses
    ? [
        ...(emitter === addresses.jobRegistry.toLowerCase() ? [jobRegistryInterface] : []),
        ...(emitter === addresses.workerRegistry.toLowerCase() ? [workerRegistryInterface] : []),
      ]
    : [jobRegistryInterface, workerRegistryInterface];
  for (const contractInterface of candidates) {
    let parsed;
    try {
      parsed = contractInterface.parseLog({ topics: [...log.topics], data: log.data });
    } catch {
      // A topic that matches an event whose data does not decode is not that event.
      continue;
    }
    if (!parsed) continue;
    const position: LogPosition = {
      address: log.address,
      blockNumber: log.blockNumber,
      blockHash: log.blockHash,
      transactionHash: log.transactionHash,
      logIndex: log.index,
    };
    if (parsed.name === 'ParametersSet') {
      const struct = parsed.args[0] as ParametersStructOutput;
      return { name: 'ParametersSet', args: { parameters: fromParametersStruct(struct) }, ...position };
    }
    const args = Object.fromEntries(
      parsed.fragment.inputs.map((input, index) => [input.name, plainValue(parsed.args[index])]),
    );
    return { name: parsed.name, args, ...position } as ProtocolEvent;
  }
  return undefined;
}

/** ethers Results (arrays with names) become plain arrays, so events compare and serialise simply. */
function plainValue(value: unknown): unknown {
  if (Array.isArray(value)) return Array.from(value, plainValue);
  return value;
}

/** The topic0 of each named event, for log filters. */
export function protocolEventTopics(names: readonly ProtocolEventName[]): string[] {
  return names.map((name) => {
    const event = jobRegistryInterface.getEvent(name) ?? workerRegistryInterface.getEvent(name);
    if (!event) throw new Error(`unknown protocol event ${name}`);
    return event.topicHash;
  });
}
