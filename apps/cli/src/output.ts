import type { Ora } from 'ora';
import type { CliError } from './errors.js';

/**
 * Where a command's results go: human text on stdout, or with --json exactly one JSON document on
 * stdout (results and errors alike). Progress and notes go to stderr, only for a person at a terminal.
 */
export class Output {
  constructor(
    readonly json: boolean,
    private readonly stdout: NodeJS.WritableStream = process.stdout,
    private readonly stderr: NodeJS.WritableStream & { isTTY?: boolean } = process.stderr,
  ) {}

  /** The command's result: `value` as JSON with --json, else the human rendering. */
  result(value: unknown, human: () => string): void {
    if (this.json) this.stdout.write(`${JSON.stringify(value, bigintAsString, 2)}\n`);
    else {
      const text = human();
      if (text) this.stdout.write(`${text}\n`);
    }
  }

  /** Streamed text (a chat answer) as it comes; nothing with --json, whose document comes at the end. */
  write(text: string): void {
    if (!this.json) this.stdout.write(text);
  }

  /** A note for a person (stderr); silent with --json. */
  note(text: string): void {
    if (!this.json) this.stderr.write(`${text}\n`);
  }

  /**
   * A spinner on stderr while something slow happens; silent with --json or when stderr is not a terminal.
   * ora is loaded here, by the commands that show progress, not by every run of svc.
   */
  async progress(text: string): Promise<Ora> {
    const { default: ora } = await import('ora');
    return ora({ text, stream: this.stderr, isSilent: this.json || !this.stderr.isTTY });
  }

  /** One line (or one JSON document) for a failure. */
  error(error: CliError): void {
    const { status, code, remedy, command, fields } = error.details;
    if (this.json) {
      const value = { error: { message: error.message, status, code, remedy, command, ...fields } };
      this.stdout.write(`${JSON.stringify(value, bigintAsString, 2)}\n`);
      return;
    }
    // `<code>: <the server's message>`, then the svc command to run, or else the documented remedy
    // when the message does not already end with it.
    const message = error.message.trim();
    const said = (text: string) => message.toLowerCase().includes(text.toLowerCase().replace(/[.\s]+$/, ''));
    const next = command ? ` Run: ${command}` : remedy && !said(remedy) ? ` ${remedy}` : '';
    const sentence = /[.!?]$/.test(message) ? message : `${message}.`;
    this.stderr.write(`svc: ${code ? `${code}: ` : ''}${sentence}${next}\n`);
  }
}

function bigintAsString(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? value.toString() : value;
}
