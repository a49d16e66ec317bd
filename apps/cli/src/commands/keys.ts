import type { ApiKeyJson } from '@svc/api';
import { ApiClient } from '../api-client.js';
import { formatAmount, parseAmount } from '../amounts.js';
import type { CommandContext } from '../context.js';
import { table } from '../table.js';

function api(context: CommandContext): ApiClient {
  return new ApiClient(context.baseUrl, context.signInToken().token);
}

/** `none` removes the cap; anything else is an amount. */
function capOf(text: string): string | null {
  return text.toLowerCase() === 'none' ? null : parseAmount(text, 'cap').toString();
}

function describeCap(key: ApiKeyJson): string {
  return key.spendCapWei === null ? 'no cap' : `cap ${formatAmount(key.spendCapWei)}`;
}

/** `svc keys create`: mints a key and shows it once; `--save` keeps it for `svc chat` and `svc models`. */
export async function createKey(
  context: CommandContext,
  options: { name?: string; cap?: string; save?: boolean },
): Promise<void> {
  const spendCapWei = options.cap === undefined ? undefined : capOf(options.cap);
  const { token, address } = context.signInToken();
  const minted = await new ApiClient(context.baseUrl, token).createKey({
    ...(options.name === undefined ? {} : { name: options.name }),
    ...(spendCapWei === undefined ? {} : { spendCapWei }),
  });
  if (options.save)
    context.credentials.saveKey(context.baseUrl, address, {
      id: minted.id,
      prefix: minted.prefix,
      key: minted.key,
    });
  context.output.result({ ...minted, saved: Boolean(options.save) }, () =>
    [
      minted.key,
      `Key ${minted.id} (${minted.prefix}…${minted.name ? `, "${minted.name}"` : ''}, ${describeCap(minted)}).`,
      'This is the only time the key is shown: keep it now.',
      options.save ? `Saved in ${context.credentials.path} for svc chat.` : '',
    ]
      .filter(Boolean)
      .join('\n'),
  );
}

/** `svc keys list`: every key of the wallet, revoked ones included, newest first. */
export async function listKeys(context: CommandContext): Promise<void> {
  const keys = await api(context).listKeys();
  context.output.result(keys, () => {
    if (keys.length === 0) return 'No keys yet: svc keys create';
    const rows = keys.map((key) => [
      key.id,
      key.prefix,
      key.name,
      key.spendCapWei ?? '-',
      key.spentWei,
      `${key.limitHits.rate}/${key.limitHits.concurrency}/${key.limitHits.spendCap}/${key.limitHits.sessionOpens}`,
      key.createdAt,
      key.revokedAt ? `revoked ${key.revokedAt}` : 'active',
    ]);
    return table(
      ['ID', 'PREFIX', 'NAME', 'CAP (WEI)', 'SPENT (WEI)', 'LIMIT HITS', 'CREATED', 'STATE'],
      rows,
    );
  });
}

/** `svc keys cap <id> <amount|none>`. */
export async function capKey(context: CommandContext, id: string, cap: string): Promise<void> {
  const key = await api(context).setCap(id, capOf(cap));
  context.output.result(key, () => `Key ${key.prefix}… now has ${describeCap(key)}.`);
}

/** `svc keys revoke <id>`: the key stops working at once; it stays listed. */
export async function revokeKey(context: CommandContext, id: string): Promise<void> {
  await api(context).revokeKey(id);
  context.credentials.dropKey(context.baseUrl, id);
  context.output.result({ id, revoked: true }, () => `Key ${id} revoked.`);
}

/** `svc keys delete <id>`: a revoked key leaves the listing. */
export async function deleteKey(context: CommandContext, id: string): Promise<void> {
  await api(context).deleteKey(id);
  context.credentials.dropKey(context.baseUrl, id);
  context.output.result({ id, deleted: true }, () => `Key ${id} deleted.`);
}
