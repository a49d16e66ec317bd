import type { UsageListJson } from '@svc/api';
import { ApiClient, type UsageQuery } from '../api-client.js';
import type { CommandContext } from '../context.js';
import { CliError, EXIT, usageError } from '../errors.js';
import { USAGE_MAX_LIMIT, parseUsageLimit, parseUsageTime, renderUsage } from '../usage.js';

export interface UsageOptions {
  readonly key?: string;
  readonly since?: string;
  readonly until?: string;
  readonly limit?: string;
  readonly all?: boolean;
}

/**
 * `svc usage`: the wallet's `/v1` calls, newest first (`GET /api/usage`): a page of them, or with `--all`
 * every page, following `nextCursor`. `--json` prints the API's answer (with `--all`, every page's
 * records in one `data`, `nextCursor` null, and the first page's `summary`).
 */
export async function usage(context: CommandContext, options: UsageOptions): Promise<void> {
  // Everything on the command line is checked before the sign-in is looked at or anything is sent.
  const from = options.since === undefined ? undefined : parseUsageTime(options.since, '--since');
  const to = options.until === undefined ? undefined : parseUsageTime(options.until, '--until');
  if (from !== undefined && to !== undefined && Date.parse(from) > Date.parse(to))
    throw usageError(`--since ${from} is after --until ${to}`);
  const key = options.key?.trim();
  if (key === '') throw usageError('--key needs a key id (svc keys list)');
  const limit =
    options.limit !== undefined ? parseUsageLimit(options.limit) : options.all ? USAGE_MAX_LIMIT : undefined;
  const api = new ApiClient(context.baseUrl, context.signInToken().token);
  const query: UsageQuery = { from, to, key, limit };

  const first = await api.usage(query);
  let list: UsageListJson = first;
  if (options.all) {
    const data = [...first.data];
    const seen = new Set<string>();
    for (let cursor = first.nextCursor; cursor !== null;) {
      if (seen.has(cursor))
        throw new CliError(`the usage listing at ${context.baseUrl} repeated a page`, EXIT.failed, {
          remedy: 'Retry; without --all, svc usage shows the newest page',
        });
      seen.add(cursor);
      const page = await api.usage({ ...query, cursor });
      data.push(...page.data);
      cursor = page.nextCursor;
    }
    list = { data, nextCursor: null, summary: first.summary };
  }
  context.output.result(list, () => renderUsage(list, { key, since: from, until: to }));
}
