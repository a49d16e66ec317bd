import { useCallback, useEffect, useState } from 'preact/hooks';
import type { ApiKeyJson, MintedApiKeyJson } from '@svc/api';
import { ethDecimal, formatEth, parseEthAmount } from '../amounts.js';
import { ServiceError } from '../api/api-error.js';
import { serviceApi } from '../api/service-api.js';
import { ConfirmDialog } from './confirm-dialog.js';
import { ErrorNotice } from './error-notice.js';

const COLUMNS = ['Key', 'Spend cap', 'Spent', 'Limit hits', 'Created', 'Status', 'Actions'];

type Confirmation = { readonly action: 'revoke' | 'delete'; readonly key: ApiKeyJson };

/**
 * The wallet's API keys: every key, newest first, as `GET /api/api-keys` lists them; minting (the full key
 * shown once), caps, revocation and deletion. A 401 means the sign-in lapsed: `onUnauthorized` leads back.
 */
export function KeysView(props: {
  token: string;
  onUnauthorized: (error: ServiceError) => void;
  onUseKey: (key: string) => void;
}) {
  const { token, onUnauthorized } = props;
  const [keys, setKeys] = useState<readonly ApiKeyJson[]>();
  const [error, setError] = useState<unknown>();
  const [minted, setMinted] = useState<MintedApiKeyJson>();
  const [editingCap, setEditingCap] = useState<string>();
  const [confirmation, setConfirmation] = useState<Confirmation>();

  const refusal = useCallback(
    (failure: unknown) => {
      if (failure instanceof ServiceError && failure.status === 401) onUnauthorized(failure);
      else setError(failure);
    },
    [onUnauthorized],
  );
  const refresh = useCallback(() => serviceApi.listKeys(token).then(setKeys, refusal), [token, refusal]);
  useEffect(() => void refresh(), [refresh]);

  /**
   * Runs one key call and shows its refusal (a lapsed sign-in leaves the page); `then` takes the result
   * before the table is refreshed, so a refresh that fails (a 429, the network) never loses it: a minted
   * key is shown once, and only then.
   */
  const run = async <T,>(action: () => Promise<T>, then: (result: T) => void = () => undefined) => {
    setError(undefined);
    let result: T;
    try {
      result = await action();
    } catch (failure) {
      refusal(failure);
      return false;
    }
    then(result);
    await refresh();
    return true;
  };

  const active = keys?.filter((key) => key.revokedAt === null).length ?? 0;
  return (
    <section aria-labelledby="keys-title">
      <h1 id="keys-title">API keys</h1>
      <p class="lead">
        Keys call <code>/v1</code> with any OpenAI client. Each call is paid from this wallet's prepaid
        balance; a cap bounds what one key can ever spend. {keys ? `${active} of 25 active.` : null}
      </p>
      <CreateKeyForm onCreate={(request) => run(() => serviceApi.mintKey(token, request), setMinted)} />
      {minted ? (
        <MintedKeyPanel minted={minted} onUse={props.onUseKey} onDone={() => setMinted(undefined)} />
      ) : null}
      <ErrorNotice error={error} />
      {keys === undefined ? (
        <p aria-busy="true">Loading keys…</p>
      ) : keys.length === 0 ? (
        <p class="empty">No keys yet. Create one above.</p>
      ) : (
        <div class="table-wrap">
          {/* Explicit roles: at phone width the table is laid out as cards, which drops its semantics. */}
          <table class="keys" role="table">
            <caption class="visually-hidden">API keys, newest first</caption>
            <thead role="rowgroup">
              <tr role="row">
                {COLUMNS.map((column) => (
                  <th key={column} scope="col" role="columnheader">
                    {column}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody role="rowgroup">
              {keys.map((key) => (
                <KeyRow
                  key={key.id}
                  apiKey={key}
                  editingCap={editingCap === key.id}
                  onEditCap={(editing) => setEditingCap(editing ? key.id : undefined)}
                  onSetCap={async (spendCapWei) => {
                    await run(
                      () => serviceApi.setCap(token, key.id, spendCapWei),
                      () => setEditingCap(undefined),
                    );
                  }}
                  onConfirm={(action) => setConfirmation({ action, key })}
                />
              ))}
            </tbody>
          </table>
        </div>
      )}
      {confirmation ? (
        <ConfirmDialog
          title={confirmation.action === 'revoke' ? 'Revoke this key?' : 'Delete this key?'}
          confirmLabel={confirmation.action === 'revoke' ? 'Revoke' : 'Delete'}
          onCancel={() => setConfirmation(undefined)}
          onConfirm={() => {
            const { action, key } = confirmation;
            setConfirmation(undefined);
            void run(() =>
              action === 'revoke' ? serviceApi.revokeKey(token, key.id) : serviceApi.deleteKey(token, key.id),
            );
          }}
        >
          {confirmation.action === 'revoke' ? (
            <p>
              <code>{confirmation.key.prefix}</code> stops working at once, on every call after this one. It
              stays listed until you delete it. This cannot be undone.
            </p>
          ) : (
            <p>
              <code>{confirmation.key.prefix}</code> leaves the list for good. Its spend is no longer shown.
            </p>
          )}
        </ConfirmDialog>
      ) : null}
    </section>
  );
}

function CreateKeyForm({
  onCreate,
}: {
  onCreate: (request: { name?: string; spendCapWei?: string }) => Promise<boolean>;
}) {
  const [name, setName] = useState('');
  const [cap, setCap] = useState('');
  const [busy, setBusy] = useState(false);
  const capWei = cap.trim() === '' ? null : parseEthAmount(cap);
  return (
    <form
      class="card create-key"
      aria-label="Create a key"
      onSubmit={async (event) => {
        event.preventDefault();
        if (capWei === undefined || busy) return;
        setBusy(true);
        const created = await onCreate({
          ...(name.trim() ? { name: name.trim() } : {}),
          ...(capWei !== null ? { spendCapWei: capWei.toString() } : {}),
        });
        setBusy(false);
        if (created) {
          setName('');
          setCap('');
        }
      }}
    >
      <label>
        <span>
          Name <span class="optional">(optional)</span>
        </span>
        <input
          name="name"
          maxLength={64}
          autoComplete="off"
          value={name}
          onInput={(event) => setName(event.currentTarget.value)}
        />
      </label>
      <label>
        <span>
          Spend cap in ETH <span class="optional">(optional)</span>
        </span>
        <input
          name="spendCap"
          inputMode="decimal"
          autoComplete="off"
          placeholder="No cap"
          value={cap}
          aria-invalid={capWei === undefined}
          onInput={(event) => setCap(event.currentTarget.value)}
        />
      </label>
      <button type="submit" class="primary" disabled={busy || capWei === undefined}>
        Create key
      </button>
      {capWei === undefined ? (
        <p class="hint field-error">The cap is an amount in ETH, such as 0.05.</p>
      ) : null}
    </form>
  );
}

function MintedKeyPanel(props: {
  minted: MintedApiKeyJson;
  onUse: (key: string) => void;
  onDone: () => void;
}) {
  const [copied, setCopied] = useState<'yes' | 'failed'>();
  return (
    <section class="card minted" aria-labelledby="minted-title">
      <h2 id="minted-title">Your new key{props.minted.name ? `: ${props.minted.name}` : ''}</h2>
      <p class="warning">
        <strong>Copy it now.</strong> It will not be shown again: the service keeps only a hash of it.
      </p>
      <div class="key-reveal">
        <code data-testid="minted-key">{props.minted.key}</code>
        <button
          type="button"
          onClick={async () => {
            try {
              await navigator.clipboard.writeText(props.minted.key);
              setCopied('yes');
            } catch {
              setCopied('failed');
            }
          }}
        >
          Copy
        </button>
      </div>
      <p aria-live="polite" class="hint">
        {copied === 'yes'
          ? 'Copied to the clipboard.'
          : copied === 'failed'
            ? 'The browser refused the clipboard: select the key and copy it.'
            : ''}
      </p>
      <div class="actions">
        <button type="button" onClick={() => props.onUse(props.minted.key)}>
          Try it in the playground
        </button>
        <button type="button" onClick={props.onDone}>
          Done
        </button>
      </div>
    </section>
  );
}

function KeyRow(props: {
  apiKey: ApiKeyJson;
  editingCap: boolean;
  onEditCap: (editing: boolean) => void;
  onSetCap: (spendCapWei: string | null) => Promise<void>;
  onConfirm: (action: 'revoke' | 'delete') => void;
}) {
  const { apiKey: key } = props;
  const revoked = key.revokedAt !== null;
  const hits = key.limitHits;
  return (
    <tr role="row" class={revoked ? 'revoked' : undefined} data-key-prefix={key.prefix}>
      <td role="cell" data-label="Key">
        <div>
          <code class="key-prefix">{key.prefix}…</code>
          {key.name ? <div class="key-name">{key.name}</div> : null}
        </div>
      </td>
      <td
        role="cell"
        data-label="Spend cap"
        title={key.spendCapWei === null ? undefined : `${key.spendCapWei} wei`}
      >
        {key.spendCapWei === null ? 'No cap' : formatEth(key.spendCapWei)}
      </td>
      <td role="cell" data-label="Spent" title={`${key.spentWei} wei`}>
        {formatEth(key.spentWei)}
      </td>
      <td role="cell" data-label="Limit hits">
        <span title="Refused by the rate limit, the concurrency limit, the spend cap and the session-open limit">
          rate {hits.rate} · concurrency {hits.concurrency} · cap {hits.spendCap} · sessions{' '}
          {hits.sessionOpens}
        </span>
      </td>
      <td role="cell" data-label="Created">
        <time dateTime={key.createdAt}>{new Date(key.createdAt).toLocaleString()}</time>
      </td>
      <td role="cell" data-label="Status">
        {revoked ? (
          <span class="badge muted">
            Revoked <time dateTime={key.revokedAt!}>{new Date(key.revokedAt!).toLocaleString()}</time>
          </span>
        ) : (
          <span class="badge ok">Active</span>
        )}
      </td>
      <td role="cell" data-label="Actions">
        <div class="row-actions">
          {revoked ? (
            <button
              type="button"
              class="danger"
              aria-label={`Delete ${key.prefix}`}
              onClick={() => props.onConfirm('delete')}
            >
              Delete
            </button>
          ) : props.editingCap ? (
            <CapForm apiKey={key} onSave={props.onSetCap} onCancel={() => props.onEditCap(false)} />
          ) : (
            <>
              <button
                type="button"
                aria-label={`Set cap of ${key.prefix}`}
                onClick={() => props.onEditCap(true)}
              >
                Set cap
              </button>
              {key.spendCapWei !== null ? (
                <button
                  type="button"
                  aria-label={`Remove cap of ${key.prefix}`}
                  onClick={() => void props.onSetCap(null)}
                >
                  Remove cap
                </button>
              ) : null}
              <button
                type="button"
                class="danger"
                aria-label={`Revoke ${key.prefix}`}
                onClick={() => props.onConfirm('revoke')}
              >
                Revoke
              </button>
            </>
          )}
        </div>
      </td>
    </tr>
  );
}

function CapForm(props: {
  apiKey: ApiKeyJson;
  onSave: (spendCapWei: string) => Promise<void>;
  onCancel: () => void;
}) {
  const [text, setText] = useState(
    props.apiKey.spendCapWei === null ? '' : ethDecimal(props.apiKey.spendCapWei),
  );
  const wei = parseEthAmount(text);
  return (
    <form
      class="cap-form"
      aria-label={`Spend cap of ${props.apiKey.prefix}`}
      onSubmit={(event) => {
        event.preventDefault();
        if (wei !== undefined) void props.onSave(wei.toString());
      }}
      onKeyDown={(event) => {
        if (event.key === 'Escape') props.onCancel();
      }}
    >
      <label>
        Cap in ETH
        <input
          name="cap"
          inputMode="decimal"
          autoComplete="off"
          autoFocus
          value={text}
          aria-invalid={wei === undefined}
          onInput={(event) => setText(event.currentTarget.value)}
        />
      </label>
      <button
        type="submit"
        class="primary"
        disabled={wei === undefined}
        aria-label={`Set cap of ${props.apiKey.prefix}`}
      >
        Set cap
      </button>
      <button type="button" onClick={props.onCancel}>
        Cancel
      </button>
    </form>
  );
}
