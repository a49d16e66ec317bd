import { useEffect, useRef, useState } from 'preact/hooks';
import type { ServiceObject } from '@svc/api';
import { shorten } from '../amounts.js';
import { ServiceError } from '../api/api-error.js';
import { listModels, streamCompletion, type ChatTurn } from '../api/completions.js';
import { delegateAcceptsOf, type DelegateAccepts } from '../api/delegate-accepts.js';
import type { Eip1193Provider } from '../wallet/wallet-discovery.js';
import { ErrorNotice } from './error-notice.js';
import { FundingPanel } from './funding-panel.js';

const KEY_PATTERN = /^svc_[0-9A-Za-z]{43}$/;

interface Exchange {
  readonly id: number;
  readonly question: string;
  readonly answer: string;
  readonly service?: ServiceObject;
  readonly error?: unknown;
  readonly done: boolean;
}

let nextExchangeId = 0;

/**
 * The conversation's `conversation_id`: random, so calls of one conversation go back to its session.
 * From getRandomValues, which (unlike randomUUID) works on a plain-HTTP origin too.
 */
function newConversationId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
}

/**
 * Try a model: pick one from `/v1/models`, chat with streaming, and see the on-chain job behind every
 * answer. A call refused 402 because the wallet has not funded the service's signer offers the deposit
 * step, with the transaction and least value from the refusal's `accepts` entry.
 */
export function PlaygroundView(props: {
  apiKey: string;
  onApiKey: (key: string) => void;
  /** The signed-in wallet, which sends the deposit. */
  wallet: { provider: Eip1193Provider; address: string } | undefined;
  /** The delegate entry of the last 402, while it waits for its deposit (kept across pages). */
  refusal: DelegateAccepts | undefined;
  onRefusal: (accepts: DelegateAccepts | undefined) => void;
}) {
  const { apiKey } = props;
  const [models, setModels] = useState<readonly string[]>();
  const [model, setModel] = useState('');
  const [modelsError, setModelsError] = useState<unknown>();
  const [system, setSystem] = useState('');
  const [draft, setDraft] = useState('');
  const [exchanges, setExchanges] = useState<readonly Exchange[]>([]);
  const [conversationId, setConversationId] = useState(newConversationId);
  const [announcement, setAnnouncement] = useState('');
  const inFlight = useRef<AbortController>(undefined);
  const keyValid = KEY_PATTERN.test(apiKey);

  useEffect(() => {
    setModels(undefined);
    setModelsError(undefined);
    if (!keyValid) return;
    let current = true;
    listModels(apiKey).then(
      (ids) => {
        if (!current) return;
        setModels(ids);
        setModel((chosen) => (ids.includes(chosen) ? chosen : (ids[0] ?? '')));
      },
      (error: unknown) => current && setModelsError(error),
    );
    return () => {
      current = false;
    };
  }, [apiKey, keyValid]);
  useEffect(() => () => inFlight.current?.abort(), []);

  const busy = exchanges.at(-1)?.done === false;
  const send = async (event?: Event) => {
    event?.preventDefault();
    const question = draft.trim();
    if (!question || busy || !keyValid || !model) return;
    const history: ChatTurn[] = [
      ...(system.trim() ? [{ role: 'system' as const, content: system.trim() }] : []),
      ...exchanges
        .filter((exchange) => exchange.error === undefined)
        .flatMap((exchange): ChatTurn[] => [
          { role: 'user', content: exchange.question },
          { role: 'assistant', content: exchange.answer },
        ]),
      { role: 'user', content: question },
    ];
    setDraft('');
    setAnnouncement('');
    props.onRefusal(undefined);
    const id = nextExchangeId++;
    // By id: a stream cut short by "New conversation" must not write into the next one.
    const update = (change: Partial<Exchange>) =>
      setExchanges((all) =>
        all.map((exchange) => (exchange.id === id ? { ...exchange, ...change } : exchange)),
      );
    setExchanges((all) => [...all, { id, question, answer: '', done: false }]);
    const controller = new AbortController();
    inFlight.current = controller;
    let answer = '';
    try {
      const service = await streamCompletion(
        apiKey,
        { model, messages: history, conversationId },
        (text) => {
          answer += text;
          update({ answer });
        },
        controller.signal,
      );
      update({ answer, done: true, ...(service ? { service } : {}) });
      setAnnouncement('The answer is complete.');
    } catch (error) {
      // Cut short by "New conversation" or by leaving the page: nothing to report, nothing to resend.
      if (controller.signal.aborted) return;
      update({ answer, error, done: true });
      // The question goes back to the composer, to send again once the remedy is applied.
      setDraft((current) => current || question);
      const accepts =
        error instanceof ServiceError && error.status === 402 ? delegateAcceptsOf(error.fields) : undefined;
      if (accepts) props.onRefusal(accepts);
      setAnnouncement('The call was refused.');
    }
  };

  return (
    <section aria-labelledby="playground-title">
      <h1 id="playground-title">Playground</h1>
      <div class="card playground-settings">
        <label>
          API key
          <input
            name="apiKey"
            type="password"
            autoComplete="off"
            spellcheck={false}
            placeholder="svc_…"
            value={apiKey}
            aria-invalid={apiKey !== '' && !keyValid}
            onInput={(event) => props.onApiKey(event.currentTarget.value.trim())}
          />
        </label>
        <label>
          Model
          <select
            name="model"
            value={model}
            disabled={!models?.length}
            onChange={(event) => setModel(event.currentTarget.value)}
          >
            {models?.length ? (
              models.map((id) => (
                <option key={id} value={id}>
                  {id}
                </option>
              ))
            ) : (
              <option value="">
                {keyValid
                  ? models
                    ? 'No worker serves a model now'
                    : 'Loading models…'
                  : 'Enter a key first'}
              </option>
            )}
          </select>
        </label>
        <label class="wide">
          <span>
            System message <span class="optional">(optional)</span>
          </span>
          <input
            name="system"
            autoComplete="off"
            value={system}
            onInput={(event) => setSystem(event.currentTarget.value)}
          />
        </label>
        {apiKey !== '' && !keyValid ? (
          <p class="hint field-error">A key is svc_ followed by 43 letters and digits.</p>
        ) : null}
      </div>
      <ErrorNotice error={modelsError} title="Could not list the models" />
      {/* Announced once per answer; the transcript itself is not live, or every streamed piece would be read out. */}
      <p class="visually-hidden" role="status">
        {announcement}
      </p>
      <ol class="transcript" aria-label="Conversation">
        {exchanges.map((exchange) => (
          <li key={exchange.id} class="exchange">
            <div class="bubble user">
              <span class="visually-hidden">You: </span>
              {exchange.question}
            </div>
            {exchange.answer || !exchange.error ? (
              <div class="bubble assistant" aria-busy={!exchange.done} data-testid="answer">
                <span class="visually-hidden">Answer: </span>
                {exchange.answer || (exchange.done ? '' : '…')}
              </div>
            ) : null}
            {exchange.service ? <ServiceDetails service={exchange.service} /> : null}
            {exchange.error ? <ErrorNotice error={exchange.error} title="The call was refused" /> : null}
          </li>
        ))}
      </ol>
      {props.refusal && props.wallet && !samePayer(props.refusal, props.wallet.address) ? (
        <p class="notice" role="status">
          This key belongs to <code>{props.refusal.payer}</code>, not to the wallet signed in here: sign in
          with that wallet to fund its calls.
        </p>
      ) : null}
      {props.refusal && props.wallet && samePayer(props.refusal, props.wallet.address) ? (
        <section class="card" aria-labelledby="funding-title">
          <h2 id="funding-title">Fund your calls</h2>
          <FundingPanel
            provider={props.wallet.provider}
            chainId={props.refusal.chainId}
            from={props.wallet.address}
            transaction={props.refusal.transaction}
            minimumWei={props.refusal.minimumWei}
            suggestedWei={props.refusal.minimumWei}
            onMined={() => undefined}
          />
        </section>
      ) : null}
      <form class="composer" onSubmit={send}>
        <label class="visually-hidden" for="message">
          Message
        </label>
        <textarea
          id="message"
          name="message"
          rows={3}
          placeholder="Ask something (Ctrl+Enter sends)"
          value={draft}
          onInput={(event) => setDraft(event.currentTarget.value)}
          onKeyDown={(event) => {
            if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) void send();
          }}
        />
        <div class="actions">
          <button
            type="button"
            onClick={() => {
              inFlight.current?.abort();
              setExchanges([]);
              setConversationId(newConversationId());
            }}
          >
            New conversation
          </button>
          <button type="submit" class="primary" disabled={busy || !keyValid || !model || draft.trim() === ''}>
            Send
          </button>
        </div>
      </form>
    </section>
  );
}

function samePayer(refusal: DelegateAccepts, address: string): boolean {
  return refusal.payer.toLowerCase() === address.toLowerCase();
}

function ServiceDetails({ service }: { service: ServiceObject }) {
  return (
    <details class="service" open>
      <summary>On chain: job {service.job_id}</summary>
      <dl class="facts compact" data-testid="service">
        <dt>Job</dt>
        <dd>{service.job_id}</dd>
        <dt>Session</dt>
        <dd>{service.session_id}</dd>
        <dt>Transaction</dt>
        <dd>
          <code title={service.tx_hash}>{shorten(service.tx_hash)}</code>
        </dd>
        <dt>Worker</dt>
        <dd>
          <code title={service.worker}>{shorten(service.worker)}</code>
        </dd>
        {service.dropped_messages !== undefined ? (
          <>
            <dt>Dropped messages</dt>
            <dd>{service.dropped_messages}</dd>
          </>
        ) : null}
      </dl>
    </details>
  );
}
