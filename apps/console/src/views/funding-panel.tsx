import { useState } from 'preact/hooks';
import { ethDecimal, formatEth, parseEthAmount, shorten } from '../amounts.js';
import type { FundingTransaction } from '../wallet/wallet-position.js';
import { sendFunding } from '../wallet/wallet-position.js';
import type { Eip1193Provider } from '../wallet/wallet-discovery.js';
import { ErrorNotice } from './error-notice.js';

type Progress =
  | { readonly stage: 'idle' }
  | { readonly stage: 'signing' }
  | { readonly stage: 'mining'; readonly hash: string }
  | { readonly stage: 'mined'; readonly hash: string; readonly block: number }
  | { readonly stage: 'failed'; readonly error: unknown; readonly hash?: string };

/**
 * "Deposit and authorize": sends `depositAndAuthorize(<the service's signer>)` from the wallet, the
 * transaction a delegate-path 402 lists in `error.accepts`, and follows it until mined. The value starts at
 * the least that makes the refused call payable (`minimum_value_wei`) and can be raised, never lowered
 * below it.
 */
export function FundingPanel(props: {
  provider: Eip1193Provider;
  chainId: number;
  from: string;
  /** The call without its value: `to` and `data` as the `accepts` entry gives them. */
  transaction: Omit<FundingTransaction, 'value'>;
  minimumWei: bigint;
  suggestedWei: bigint;
  onMined: () => void;
}) {
  const [amount, setAmount] = useState(() => ethDecimal(props.suggestedWei));
  const [progress, setProgress] = useState<Progress>({ stage: 'idle' });
  const value = parseEthAmount(amount);
  const tooLow = value !== undefined && value < props.minimumWei;
  const busy = progress.stage === 'signing' || progress.stage === 'mining';

  const send = async (event: Event) => {
    event.preventDefault();
    if (value === undefined || tooLow || busy) return;
    setProgress({ stage: 'signing' });
    let hash: string | undefined;
    try {
      const receipt = await sendFunding(
        props.provider,
        props.chainId,
        props.from,
        { ...props.transaction, value },
        (sent) => {
          hash = sent;
          setProgress({ stage: 'mining', hash: sent });
        },
      );
      setProgress({ stage: 'mined', hash: receipt.hash, block: receipt.blockNumber });
      props.onMined();
    } catch (error) {
      setProgress({ stage: 'failed', error, ...(hash ? { hash } : {}) });
    }
  };

  return (
    <form class="funding" onSubmit={send} aria-label="Deposit and authorize">
      <p>
        Adds the amount to your prepaid balance on JobRegistry and lets the service's signer spend up to as
        much for your keys' calls. One transaction, sent from your wallet.
      </p>
      <div class="field-row">
        <label>
          Amount (ETH)
          <input
            name="amount"
            inputMode="decimal"
            autoComplete="off"
            value={amount}
            aria-invalid={value === undefined || tooLow}
            aria-describedby="funding-hint"
            onInput={(event) => setAmount(event.currentTarget.value)}
          />
        </label>
        <button type="submit" class="primary" disabled={busy || value === undefined || tooLow}>
          Deposit and authorize
        </button>
      </div>
      <p id="funding-hint" class="hint">
        {value === undefined
          ? 'Enter an amount in ETH, such as 0.01.'
          : tooLow
            ? `At least ${formatEth(props.minimumWei)} is needed for the call that was refused.`
            : props.minimumWei > 1n
              ? `The refused call needs at least ${formatEth(props.minimumWei)}.`
              : 'Any amount above zero.'}
      </p>
      <div aria-live="polite" class="funding-status">
        {progress.stage === 'signing' ? <p>Confirm the transaction in your wallet…</p> : null}
        {progress.stage === 'mining' ? (
          <p>
            Transaction <code title={progress.hash}>{shorten(progress.hash)}</code> sent; waiting until it is
            mined…
          </p>
        ) : null}
        {progress.stage === 'mined' ? (
          <p class="success">
            Transaction <code title={progress.hash}>{shorten(progress.hash)}</code> mined in block{' '}
            {progress.block}.
          </p>
        ) : null}
      </div>
      {progress.stage === 'failed' ? (
        <ErrorNotice error={progress.error} title="The transaction failed" />
      ) : null}
    </form>
  );
}
