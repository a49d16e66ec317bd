import { describe, expect, it } from '@jest/globals';
import { buildProgram } from '../src/program.js';
import { REMEDIES, remedyOf } from '../src/remedies.js';

// The remedies themselves are docs/api.md's (checked in @svc/api's test/remedies.unit.test.ts); here, the
// svc commands that carry them out.

describe('REMEDIES', () => {
  it('names only svc commands that exist', () => {
    const { program } = buildProgram({});
    const commandPath = (words: string[]): string[] => {
      const path: string[] = [];
      let command = program;
      for (const word of words) {
        const sub = command.commands.find((candidate) => candidate.name() === word);
        if (!sub) break;
        path.push(word);
        command = sub;
      }
      return path;
    };
    for (const [code, { command }] of Object.entries(REMEDIES)) {
      if (command === undefined) continue;
      const [svc, ...words] = command.split(' ');
      // The command's name: the words before its first argument or option.
      const firstArgument = words.findIndex((word) => /^[<-]/.test(word));
      const names = firstArgument < 0 ? words : words.slice(0, firstArgument);
      expect({ code, svc, names: commandPath(names) }).toEqual({ code, svc: 'svc', names });
      expect(names.length).toBeGreaterThan(0);
    }
  });
});

describe('remedyOf', () => {
  it('is undefined for no code and for a code it does not know', () => {
    expect(remedyOf(null)).toBeUndefined();
    expect(remedyOf(undefined)).toBeUndefined();
    expect(remedyOf('')).toBeUndefined();
    expect(remedyOf('not_found')).toBeUndefined();
  });

  it('gives the remedy, and the command where there is one', () => {
    expect(remedyOf('job_failed')).toEqual({ remedy: 'Retry.' });
    expect(remedyOf('unauthorized')).toEqual({ remedy: 'Sign in again.', command: 'svc login' });
    expect(remedyOf('spend_cap_exceeded', { spend_cap_wei: '5' })).toEqual({
      remedy: 'Raise or remove the cap (PATCH /api/api-keys/{id}).',
      command: 'svc keys cap <id> <amount|none>',
    });
  });

  it("fills the delegate 402's minimum into svc authorize", () => {
    const accepts = [{ instruction: { minimum_value_wei: '1000000000000000' } }];
    for (const code of ['delegate_not_authorized', 'insufficient_balance', 'allowance_exhausted'])
      expect(remedyOf(code, { accepts })).toEqual({
        remedy: REMEDIES[code]!.remedy,
        command: 'svc authorize 1000000000000000 (or more)',
      });
  });

  it('keeps the placeholder without a minimum, and other commands as they are', () => {
    expect(remedyOf('delegate_not_authorized')?.command).toBe('svc authorize <amount>');
    expect(remedyOf('delegate_not_authorized', { accepts: [] })?.command).toBe('svc authorize <amount>');
    expect(remedyOf('delegate_not_authorized', { accepts: [{ instruction: {} }] })?.command).toBe(
      'svc authorize <amount>',
    );
    const accepts = [{ instruction: { minimum_value_wei: '42' } }];
    expect(remedyOf('payment_required', { accepts })?.command).toBe('svc pay');
    expect(remedyOf('insufficient_funds', { accepts })?.command).toBe('svc deposit <amount>');
  });
});
