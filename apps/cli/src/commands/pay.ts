import { setTimeout as sleep } from 'node:timers/promises';
import { confirm } from '@inquirer/prompts';
import OpenAI from 'openai';
import {
  paymentResponseOf,
  paymentSignatureFor,
  prepaidDebitRequirementsOf,
  type PrepaidDebitRequirements,
} from '@svc/x402';
import { formatAmount, parseAmount } from '../amounts.js';
import {
  completionError,
  openaiClient,
  streamCompletion,
  type Answer,
  type CompletionRequest,
} from '../completion.js';
import type { CommandContext } from '../context.js';
import { EXIT, CliError, usageError } from '../errors.js';
import { loadWallet, type WalletOptions } from '../wallet.js';
import { messageOf, messagesOf } from './chat.js';

export interface PayOptions extends WalletOptions {
  readonly model?: string;
  readonly system?: string;
  readonly conversation?: string;
  readonly verbose?: boolean;
  readonly yes?: boolean;
  /** The most this call may cost: a higher price is declined before anything is signed. */
  readonly max?: string;
}

/** After these the same PAYMENT-SIGNATURE may be sent again: a payment that settled is never charged twice. */
const RESEND_SAME_PAYMENT = new Set(['unexpected_verify_error', 'unexpected_settle_error']);
const RESENDS = 2;

/**
 * `svc pay`: one call with no API key, paid per call (x402 `prepaid-debit`) from the wallet's prepaid
 * balance: the call is sent unpaid to learn the price (402 `payment_required`), the payment is shown for
 * confirmation, signed, and the call sent again with it.
 */
export async function pay(
  context: CommandContext,
  words: readonly string[],
  options: PayOptions,
): Promise<void> {
  const model = options.model ?? context.stack?.models[0];
  if (!model) throw usageError('which model? pass --model (a call paid per call cannot list models)');
  const message = await messageOf(words);
  const request: CompletionRequest = {
    model,
    messages: messagesOf(message, options.system),
    ...(options.conversation ? { conversationId: options.conversation } : {}),
  };
  const max = options.max === undefined ? undefined : parseAmount(options.max, '--max');
  const requirements = await priceOf(context, request);
  if (max !== undefined && BigInt(requirements.amount) > max)
    throw new CliError(
      `the call costs ${formatAmount(requirements.amount)}, above --max ${formatAmount(max)}: nothing was paid`,
      EXIT.declined,
    );
  const wallet = await loadWallet(options, context.walletSource);
  await confirmPayment(context, options, wallet.address, model, requirements);
  const paymentSignature = await paymentSignatureFor(wallet, requirements);

  let answer: Answer | undefined;
  for (let attempt = 0; !answer; attempt++) {
    try {
      answer = await streamCompletion(
        openaiClient(context.baseUrl, { paymentSignature }),
        request,
        context.output,
      );
    } catch (error) {
      const code = error instanceof CliError ? error.details.code : undefined;
      if (attempt > 0 && code === 'invalid_prepaid_debit_payload_nonce_used')
        // An earlier attempt of this very payment settled (or is settling): paying anew could pay twice.
        throw new CliError(
          'the payment was refused as used after its outcome was unknown: an earlier attempt may have been charged',
          EXIT.paymentNeeded,
          { code, remedy: 'Check the prepaid balance before paying again', command: 'svc balance' },
        );
      if (attempt >= RESENDS || !code || !RESEND_SAME_PAYMENT.has(code)) throw error;
      context.output.note(`The payment's outcome is unknown (${code}); sending the same payment again.`);
      await sleep(1_000);
    }
  }
  const payment = paymentResponseOf(answer.headers);
  context.output.result({ model, text: answer.text, service: answer.service, payment }, () =>
    [
      payment?.success
        ? `Paid ${formatAmount(payment.amount)} from ${payment.payer} in ${payment.transaction}`
        : '',
      options.verbose ? `service ${JSON.stringify(answer.service, null, 2)}` : '',
    ]
      .filter(Boolean)
      .join('\n'),
  );
}

/** The requirements the service answers an unpaid call with. */
async function priceOf(
  context: CommandContext,
  request: CompletionRequest,
): Promise<PrepaidDebitRequirements> {
  const client = openaiClient(context.baseUrl, {});
  try {
    await client.chat.completions.create({ model: request.model, messages: request.messages });
  } catch (error) {
    if (error instanceof OpenAI.APIError && error.status === 402 && error.headers) {
      const requirements = prepaidDebitRequirementsOf(error.headers);
      if (requirements) return requirements;
    }
    throw completionError(error, client.baseURL);
  }
  throw new CliError('the service answered an unpaid call', EXIT.failed);
}

async function confirmPayment(
  context: CommandContext,
  options: PayOptions,
  payer: string,
  model: string,
  requirements: PrepaidDebitRequirements,
): Promise<void> {
  const summary = `Pay ${formatAmount(requirements.amount)} from the prepaid balance of ${payer} to ${requirements.payTo} for one ${model} call?`;
  if (options.yes) return;
  if (!process.stdin.isTTY || context.output.json)
    throw usageError(`${summary} Confirm with --yes (nothing to ask on: no terminal, or --json)`);
  const accepted = await confirm({ message: summary, default: false }, { output: process.stderr });
  if (!accepted) throw new CliError('payment declined', EXIT.declined);
}
