import { createWriteStream, existsSync, mkdirSync, renameSync, type WriteStream } from 'node:fs';
import { dirname } from 'node:path';
import { prettyFactory } from 'pino-pretty';
import type { LogLine } from './start-up-stages.js';

/** pino's numeric levels (the services log `level` as a label; both are read). */
const LEVELS: Readonly<Record<string, number>> = {
  trace: 10,
  debug: 20,
  info: 30,
  warn: 40,
  error: 50,
  fatal: 60,
};

export function levelOf(line: LogLine): number {
  return typeof line.level === 'number' ? line.level : (LEVELS[String(line.level)] ?? 30);
}

/** Parses one line of the server's output: a JSON log line, or undefined for anything else. */
export function parseLogLine(text: string): LogLine | undefined {
  if (!text.startsWith('{')) return undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === 'object' && parsed !== null ? (parsed as LogLine) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The log file of a run: `<STATE_DIR>/logs/server.log`, the previous run's kept as `server.previous.log`.
 * Lines are written as the server printed them (JSON).
 */
export function openLogFile(path: string): WriteStream {
  mkdirSync(dirname(path), { recursive: true });
  if (existsSync(path)) renameSync(path, path.replace(/\.log$/, '.previous.log'));
  return createWriteStream(path, { flags: 'a', mode: 0o600 });
}

/** Renders a JSON log line for a person: time, level, service, message, then the other fields. */
export function prettyLogLines(colorize: boolean): (line: string) => string {
  const pretty = prettyFactory({
    colorize,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,service',
    messageFormat: (log, messageKey) =>
      typeof log.service === 'string'
        ? `${log.service}: ${String(log[messageKey])}`
        : String(log[messageKey]),
    singleLine: true,
  });
  return (line) => pretty(line);
}
