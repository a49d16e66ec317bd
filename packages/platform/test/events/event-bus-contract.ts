import { randomUUID } from 'node:crypto';
import type { Struct } from '@bufbuild/protobuf/wkt';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { waitFor } from '@svc/testkit';
import { currentRequestId, withRequestContext } from '../../src/logging/index.js';
import {
  dedupeByEventId,
  EventBusClosedError,
  InMemoryProcessedEventIds,
  type EventBus,
  type EventHandler,
  type ReceivedEvent,
} from '../../src/events/index.js';
import { burst, deferred, readSample, sampleEvent, sampleTopic, type SampleTopic } from './fixtures.js';

export interface EventBusContractOptions {
  /** Per test; a real broker needs time for topic creation and group joins. */
  readonly testTimeoutMs?: number;
  /** How long to wait for deliveries before failing. */
  readonly deliveryTimeoutMs?: number;
}

/**
 * The behaviour every EventBus implementation must show. `makeBus` must configure a fast handler
 * retry (tens of milliseconds), since several tests make handlers fail on purpose.
 */
export function describeEventBusContract(
  name: string,
  makeBus: () => EventBus | Promise<EventBus>,
  options: EventBusContractOptions = {},
): void {
  const testTimeoutMs = options.testTimeoutMs ?? 30_000;
  const deliveryTimeoutMs = options.deliveryTimeoutMs ?? 10_000;

  describe(`EventBus contract: ${name}`, () => {
    let bus: EventBus;

    beforeEach(async () => {
      bus = await makeBus();
    }, testTimeoutMs);

    afterEach(async () => {
      // Unset when the file's setup failed (no broker): that failure is the one worth reading.
      await (bus as EventBus | undefined)?.close();
    }, testTimeoutMs);

    async function newTopic(label: string): Promise<SampleTopic> {
      const topic = sampleTopic(label);
      await bus.ensureTopics([topic]);
      return topic;
    }

    const newGroup = (label: string): string => `${label}-${randomUUID()}`;

    function recorder(): {
      events: ReceivedEvent<Struct>[];
      handler: EventHandler<Struct>;
      seqs: () => number[];
    } {
      const events: ReceivedEvent<Struct>[] = [];
      return {
        events,
        handler: async (event) => {
          events.push(event);
        },
        seqs: () => events.map((event) => readSample(event.message).seq),
      };
    }

    const until = async (condition: () => boolean, what: string): Promise<void> => {
      await waitFor(() => condition() || undefined, { what, timeoutMs: deliveryTimeoutMs });
    };

    function expectEachIdOnce(
      events: readonly ReceivedEvent<Struct>[],
      expectedIds: readonly string[],
    ): void {
      expect(events.map((event) => event.eventId).sort()).toEqual([...expectedIds].sort());
    }

    function expectPerKeyOrder(events: readonly ReceivedEvent<Struct>[]): void {
      const byKey = new Map<string, number[]>();
      for (const event of events) {
        const { key, seq } = readSample(event.message);
        byKey.set(key, [...(byKey.get(key) ?? []), seq]);
      }
      for (const [key, seqs] of byKey) {
        expect({ key, seqs }).toEqual({ key, seqs: [...seqs].sort((a, b) => a - b) });
      }
    }

    const idsOf = (messages: readonly Struct[]): string[] => messages.map((m) => readSample(m).eventId);

    it(
      'delivers every event to every consumer group, once to each',
      async () => {
        const topic = await newTopic('groups');
        const billing = recorder();
        const audit = recorder();
        await bus.subscribe(topic, { group: newGroup('billing'), handler: billing.handler });
        await bus.subscribe(topic, { group: newGroup('audit'), handler: audit.handler });

        const events = burst(20, 4);
        await bus.publishBatch(
          topic,
          events.slice(0, 10).map((message) => ({ message })),
        );
        for (const message of events.slice(10)) await bus.publish(topic, message);

        await until(
          () => billing.events.length >= 20 && audit.events.length >= 20,
          'both groups to get 20 events',
        );
        expectEachIdOnce(billing.events, idsOf(events));
        expectEachIdOnce(audit.events, idsOf(events));
      },
      testTimeoutMs,
    );

    it(
      'gives each event to one consumer of a group when two consumers share it',
      async () => {
        const topic = await newTopic('shared');
        const group = newGroup('shared');
        const first = recorder();
        const second = recorder();
        await bus.subscribe(topic, { group, handler: first.handler });
        await bus.subscribe(topic, { group, handler: second.handler });

        const events = burst(100, 10);
        await bus.publishBatch(
          topic,
          events.map((message) => ({ message })),
        );

        await until(() => first.events.length + second.events.length >= 100, 'the group to get 100 events');
        expectEachIdOnce([...first.events, ...second.events], idsOf(events));
      },
      testTimeoutMs,
    );

    it(
      'keeps each key in publish order under a burst of 200 events over 10 keys',
      async () => {
        const topic = await newTopic('order');
        const group = newGroup('order');
        const first = recorder();
        const second = recorder();
        // Handlers that take varying time would expose any delivery that is not strictly sequential per key.
        const slowly =
          (handler: EventHandler<Struct>): EventHandler<Struct> =>
          async (event) => {
            await new Promise((resolve) => setTimeout(resolve, readSample(event.message).seq % 3));
            await handler(event);
          };
        await bus.subscribe(topic, { group, handler: slowly(first.handler) });
        await bus.subscribe(topic, { group, handler: slowly(second.handler) });
        const solo = recorder();
        await bus.subscribe(topic, { group: newGroup('solo'), handler: solo.handler });

        const events = burst(200, 10);
        await bus.publishBatch(
          topic,
          events.map((message) => ({ message })),
        );

        await until(
          () => first.events.length + second.events.length >= 200 && solo.events.length >= 200,
          '200 events in both groups',
        );
        expectEachIdOnce([...first.events, ...second.events], idsOf(events));
        expectPerKeyOrder(first.events);
        expectPerKeyOrder(second.events);
        expect(solo.seqs()).toHaveLength(200);
        expectPerKeyOrder(solo.events);
      },
      testTimeoutMs,
    );

    it(
      'retries a failing handler without losing the event or reordering its key',
      async () => {
        const topic = await newTopic('retry');
        const failingSeq = 3;
        const attemptsOfFailing: number[] = [];
        const handled = recorder();
        await bus.subscribe(topic, {
          group: newGroup('retry'),
          handler: async (event) => {
            const { seq } = readSample(event.message);
            if (seq === failingSeq) {
              attemptsOfFailing.push(event.attempt);
              if (event.attempt < 3) throw new Error(`transient failure ${event.attempt}`);
            }
            await handled.handler(event);
          },
        });

        const events = burst(30, 3);
        await bus.publishBatch(
          topic,
          events.map((message) => ({ message })),
        );

        await until(() => handled.events.length >= 30, '30 handled events');
        expectEachIdOnce(handled.events, idsOf(events));
        expect(attemptsOfFailing).toEqual([1, 2, 3]);
        // seq 3 has key-0 (seq % 3): key-0's later events waited for it.
        const keyZero = handled.events
          .filter((event) => event.key === 'key-0')
          .map((e) => readSample(e.message).seq);
        expect(keyZero).toEqual(Array.from({ length: 10 }, (_, i) => i * 3));
      },
      testTimeoutMs,
    );

    it(
      'starts a new group at the beginning with fromBeginning, at the end without it',
      async () => {
        const topic = await newTopic('from-beginning');
        const earlier = burst(5, 2, 'earlier');
        await bus.publishBatch(
          topic,
          earlier.map((message) => ({ message })),
        );

        const replay = recorder();
        const live = recorder();
        await bus.subscribe(topic, {
          group: newGroup('replay'),
          handler: replay.handler,
          fromBeginning: true,
        });
        await bus.subscribe(topic, { group: newGroup('live'), handler: live.handler });

        const later = burst(5, 2, 'later');
        await bus.publishBatch(
          topic,
          later.map((message) => ({ message })),
        );

        await until(() => replay.events.length >= 10 && live.events.length >= 5, 'replay 10, live 5');
        expectEachIdOnce(replay.events, idsOf([...earlier, ...later]));
        expectEachIdOnce(live.events, idsOf(later));
      },
      testTimeoutMs,
    );

    it(
      'resumes a returning group where it left off, even with fromBeginning',
      async () => {
        const topic = await newTopic('resume');
        const group = newGroup('resume');
        const before = recorder();
        const subscription = await bus.subscribe(topic, { group, handler: before.handler });
        const first = burst(5, 2, 'first');
        await bus.publishBatch(
          topic,
          first.map((message) => ({ message })),
        );
        await until(() => before.events.length >= 5, 'the first 5 events');
        await subscription.close();

        const second = burst(5, 2, 'second');
        await bus.publishBatch(
          topic,
          second.map((message) => ({ message })),
        );
        const after = recorder();
        await bus.subscribe(topic, { group, handler: after.handler, fromBeginning: true });

        await until(() => after.events.length >= 5, 'the 5 events published while the group was away');
        expectEachIdOnce(after.events, idsOf(second));
      },
      testTimeoutMs,
    );

    it(
      "stops delivery on close(); the group's next consumer gets what followed",
      async () => {
        const topic = await newTopic('close');
        const group = newGroup('close');
        const closed = recorder();
        const subscription = await bus.subscribe(topic, { group, handler: closed.handler });
        const opening = sampleEvent({ eventId: `open-${randomUUID()}`, key: 'key-0', seq: 0 });
        await bus.publish(topic, opening);
        await until(() => closed.events.length >= 1, 'the first event');
        await subscription.close();

        const afterClose = burst(5, 5, 'after-close');
        await bus.publishBatch(
          topic,
          afterClose.map((message) => ({ message })),
        );
        const successor = recorder();
        await bus.subscribe(topic, { group, handler: successor.handler });

        await until(() => successor.events.length >= 5, 'the successor to get 5 events');
        expectEachIdOnce(closed.events, idsOf([opening]));
        expectEachIdOnce(successor.events, idsOf(afterClose));
      },
      testTimeoutMs,
    );

    it(
      'lets close() finish only after the in-flight handler has settled',
      async () => {
        const topic = await newTopic('close-in-flight');
        const entered = deferred();
        const release = deferred();
        let finishedHandling = false;
        const subscription = await bus.subscribe(topic, {
          group: newGroup('in-flight'),
          handler: async () => {
            entered.resolve();
            await release.promise;
            finishedHandling = true;
          },
        });
        await bus.publish(topic, sampleEvent({ eventId: randomUUID(), key: 'key-0', seq: 0 }));
        await entered.promise;

        let closeResolved = false;
        const closing = subscription.close().then(() => {
          closeResolved = true;
        });
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(closeResolved).toBe(false);

        release.resolve();
        await closing;
        expect(finishedHandling).toBe(true);
      },
      testTimeoutMs,
    );

    it(
      'refuses to publish or subscribe once closed',
      async () => {
        const topic = await newTopic('closed-bus');
        await bus.subscribe(topic, { group: newGroup('closed'), handler: async () => undefined });
        await bus.close();

        const message = sampleEvent({ eventId: randomUUID(), key: 'key-0', seq: 0 });
        await expect(bus.publish(topic, message)).rejects.toBeInstanceOf(EventBusClosedError);
        await expect(
          bus.subscribe(topic, { group: newGroup('late'), handler: async () => undefined }),
        ).rejects.toBeInstanceOf(EventBusClosedError);
      },
      testTimeoutMs,
    );

    it(
      'carries the event id, key, type name and request id to the handler, inside the request context',
      async () => {
        const topic = await newTopic('headers');
        const received: Array<{
          eventId: string;
          key: string;
          typeName: string;
          requestId?: string;
          context?: string;
        }> = [];
        await bus.subscribe(topic, {
          group: newGroup('headers'),
          handler: async (event) => {
            received.push({
              eventId: event.eventId,
              key: event.key,
              typeName: event.typeName,
              requestId: event.requestId,
              context: currentRequestId(),
            });
          },
        });

        await bus.publish(topic, sampleEvent({ eventId: 'explicit', key: 'wallet-a', seq: 0 }), {
          requestId: 'req-explicit',
        });
        await withRequestContext({ requestId: 'req-ambient' }, () =>
          bus.publish(topic, sampleEvent({ eventId: 'ambient', key: 'wallet-a', seq: 1 })),
        );
        await bus.publish(topic, sampleEvent({ eventId: 'none', key: 'wallet-a', seq: 2 }));

        await until(() => received.length >= 3, 'three events');
        const typeName = 'google.protobuf.Struct';
        expect(received).toEqual([
          {
            eventId: 'explicit',
            key: 'wallet-a',
            typeName,
            requestId: 'req-explicit',
            context: 'req-explicit',
          },
          { eventId: 'ambient', key: 'wallet-a', typeName, requestId: 'req-ambient', context: 'req-ambient' },
          { eventId: 'none', key: 'wallet-a', typeName, requestId: undefined, context: undefined },
        ]);
      },
      testTimeoutMs,
    );

    it(
      'reports each open subscription live, and forgets it once closed',
      async () => {
        const topic = await newTopic('health');
        const first = newGroup('health-a');
        const second = newGroup('health-b');
        const subscription = await bus.subscribe(topic, { group: first, handler: async () => undefined });
        await bus.subscribe(topic, { group: second, handler: async () => undefined });

        const ofTopic = () => bus.health().filter((health) => health.topic === topic.name);
        expect(ofTopic()).toEqual([
          { topic: topic.name, group: first, state: 'live', live: true },
          { topic: topic.name, group: second, state: 'live', live: true },
        ]);
        expect(subscription.health()).toEqual({ topic: topic.name, group: first, state: 'live', live: true });

        await subscription.close();
        expect(ofTopic().map((health) => health.group)).toEqual([second]);
        expect(subscription.health()).toMatchObject({ live: false, reason: 'closed' });
      },
      testTimeoutMs,
    );

    it(
      "delivers an event again to the group's next consumer when the one handling it stopped first (at least once)",
      async () => {
        const topic = await newTopic('redelivery');
        const group = newGroup('redelivery');
        const entered = deferred();
        const release = deferred();
        const firstAttempts: string[] = [];
        const first = await bus.subscribe(topic, {
          group,
          handler: async (event) => {
            firstAttempts.push(event.eventId);
            entered.resolve();
            await release.promise;
            // The consumer stopped while this ran (a crash, a rebalance): the handler's work is lost.
            throw new Error('consumer went away mid-handler');
          },
        });
        const message = sampleEvent({ eventId: `once-${randomUUID()}`, key: 'key-0', seq: 0 });
        await bus.publish(topic, message);
        await entered.promise;

        const closing = first.close();
        release.resolve();
        await closing;
        const successor = recorder();
        await bus.subscribe(topic, { group, handler: successor.handler });

        await until(() => successor.events.length >= 1, 'the event handed to the next consumer');
        expect(firstAttempts).toEqual([readSample(message).eventId]);
        expectEachIdOnce(successor.events, idsOf([message]));
      },
      testTimeoutMs,
    );

    it(
      'delivers a republished event again, and dedupeByEventId applies it once',
      async () => {
        const topic = await newTopic('dedupe');
        const deliveries = recorder();
        const applied = new Map<string, number>();
        const applyOnce = dedupeByEventId(new InMemoryProcessedEventIds(), async (event) => {
          applied.set(event.eventId, (applied.get(event.eventId) ?? 0) + 1);
        });
        await bus.subscribe(topic, {
          group: newGroup('dedupe'),
          handler: async (event) => {
            await deliveries.handler(event);
            await applyOnce(event);
          },
        });

        const events = burst(10, 3);
        const duplicates = events.slice(0, 5);
        await bus.publishBatch(
          topic,
          [...events, ...duplicates].map((message) => ({ message })),
        );

        await until(() => deliveries.events.length >= 15, '15 deliveries');
        expect(deliveries.events).toHaveLength(15);
        expect([...applied.keys()].sort()).toEqual(idsOf(events).sort());
        expect([...applied.values()].every((count) => count === 1)).toBe(true);
      },
      testTimeoutMs,
    );
  });
}
