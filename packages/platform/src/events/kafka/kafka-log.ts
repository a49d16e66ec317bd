import kafkajs, { type LogEntry, type logCreator } from 'kafkajs';
import type { EventBusLogger } from '../delivery.js';

const { logLevel } = kafkajs;

/** Routes kafkajs's own log lines into the service's structured logger. */
export function kafkaLogCreator(logger: EventBusLogger): logCreator {
  return () =>
    ({ namespace, level, log }: LogEntry) => {
      const { message, timestamp: _timestamp, ...details } = log;
      const fields = { component: 'kafkajs', namespace, ...details };
      if (level === logLevel.ERROR) logger.error(fields, message);
      else if (level === logLevel.WARN) logger.warn(fields, message);
      else if (level === logLevel.INFO) logger.info(fields, message);
      else logger.debug(fields, message);
    };
}
