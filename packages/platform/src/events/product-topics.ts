import { JobLifecycleEventSchema } from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import { KeyEventSchema } from '@svc/proto/gen/svc/events/v1/key_event_pb';
import { defineTopic } from './topic.js';

// The product's topics, as docs/events.md and the event protos document them, shared by every producer
// and consumer so a name or key can never differ between two services.

/** API key changes, keyed by the wallet's lowercase address so one wallet's changes stay in order. */
export const keyEventsTopic = defineTopic({
  name: 'svc.key-events.v1',
  schema: KeyEventSchema,
  key: (event) => (event.wallet?.hex ?? '').toLowerCase(),
  eventId: (event) => event.eventId,
});

/** Job lifecycle events, keyed by the call's reservation id. */
export const jobLifecycleTopic = defineTopic({
  name: 'svc.job-lifecycle.v1',
  schema: JobLifecycleEventSchema,
  key: (event) => event.reservationId,
  eventId: (event) => event.eventId,
});
