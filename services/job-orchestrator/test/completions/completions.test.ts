import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { getAddress, parseEther } from 'ethers';
import { JobState, MAX_PROMPT_PLAINTEXT_BYTES } from '@svc/chain';
import { connectJobRegistry } from '@svc/contracts';
import { MemoryStore } from '@svc/platform';
import { ChatRole } from '@svc/proto/gen/svc/common/v1/chat_pb';
import { JobLifecycleKind } from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import { sampleValue, scrape, useDevnet, waitUntil } from '@svc/testkit';
import { deterministicAnswer } from '@svc/worker';
import { DEPLOYED_MODELS, MODEL } from '../support/models.js';
import {
  completionOf,
  completionRequest,
  deliveredText,
  failureOf,
  prepareServiceAccounts,
  SERVICE_ACCOUNTS,
  shapeOf,
  startCompletionStack,
  type CompletionStack,
} from '../support/completion-stack.js';
import { fundedWallet } from '../support/reference-worker.js';

const devnet = useDevnet({ models: DEPLOYED_MODELS, warmBlobs: true, accounts: 14 });
const store = new MemoryStore();
let stack: CompletionStack;

beforeAll(async () => {
  await prepareServiceAccounts(devnet());
  stack = await startCompletionStack(devnet(), { store });
  await stack.startWorker();
  await stack.startWorker();
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  await store.close();
});

describe('RunCompletion on the delegate path', () => {
  it('streams a verified answer of a job submitted on chain, and publishes every step', async () => {
    const wallet = await stack.payingWallet();
    const events = await stack.complete(wallet.address, 'hello orchestrator');

    expect(shapeOf(events)).toEqual(['started', 'delta', 'completed']);
    const expected = deterministicAnswer([{ role: 'user', content: 'hello orchestrator' }]);
    expect(deliveredText(events)).toBe(expected);
    const completed = completionOf(events)!;
    expect(completed.text).toBe(expected);
    expect(completed.chargedWei?.decimal).toBe(MODEL.feeWei.toString());
    const first = events[0];
    const started = first?.case === 'started' ? first.value : undefined;
    expect(started?.service).toEqual(completed.service);
    expect(started?.service?.droppedMessages).toBeUndefined();

    const jobId = BigInt(completed.service!.jobId);
    // The call ended on the worker's signed final; its commitment follows on chain.
    const job = await waitUntil(
      () => stack.chain.getJob(jobId),
      (read) => read.state === JobState.Completed,
      { what: `job ${jobId} Completed`, timeoutMs: 10_000 },
    );
    expect(job.payer).toBe(wallet.address);
    expect(job.sessionId).toBe(BigInt(completed.service!.sessionId));
    expect(job.worker).toBe(completed.service!.worker!.hex);
    // The worker was told its final is committed (final_ack committed=true): it may forget it now.
    const served = stack.workers.find((worker) => worker.wallet.address === completed.service!.worker!.hex)!;
    await waitUntil(
      () => served.worker.journal.get(jobId, 1),
      (saved) => saved === undefined || saved.acknowledged,
      { what: 'the final acknowledged as committed', timeoutMs: 5_000 },
    );
    const receipt = await devnet().provider.getTransactionReceipt(completed.service!.txHash!.hex);
    expect(receipt?.status).toBe(1);
    expect((await devnet().provider.getTransaction(receipt!.hash))?.type).toBe(3);

    await waitUntil(
      async () => stack.events,
      (published) =>
        published.some(
          (event) => event.kind === JobLifecycleKind.ANSWERED && event.jobId === jobId.toString(),
        ),
      { what: 'the answered event', timeoutMs: 5_000 },
    );
    const reservation = stack.events.find((event) => event.jobId === jobId.toString())!.reservationId;
    const kinds = stack.events
      .filter((event) => event.reservationId === reservation)
      .map((event) => event.kind);
    expect(kinds).toEqual([
      JobLifecycleKind.REQUESTED,
      JobLifecycleKind.SESSION_OPENED,
      JobLifecycleKind.SESSION_CLAIMED,
      JobLifecycleKind.SUBMITTED,
      JobLifecycleKind.COMPLETED,
      JobLifecycleKind.ANSWERED,
    ]);
    const answered = stack.events.find(
      (event) => event.reservationId === reservation && event.kind === JobLifecycleKind.ANSWERED,
    )!;
    expect(answered.feeWei?.decimal).toBe(MODEL.feeWei.toString());
    expect(answered.payer?.hex).toBe(wallet.address);
  });

  it('answers a non-streamed call with the committed text only', async () => {
    const wallet = await stack.payingWallet();
    const events = await stack.complete(wallet.address, 'no stream please', { stream: false });
    expect(shapeOf(events)).toEqual(['started', 'completed']);
    expect(completionOf(events)!.text).toBe(
      deterministicAnswer([{ role: 'user', content: 'no stream please' }]),
    );
  });

  it('reuses one pooled session for sequential calls and opens a second for a concurrent one', async () => {
    const wallet = await stack.payingWallet();
    const sessions: string[] = [];
    for (let call = 0; call < 5; call++) {
      const events = await stack.complete(wallet.address, `sequential ${call}`);
      const sessionId = completionOf(events)!.service!.sessionId;
      sessions.push(sessionId);
      // The call ends on the worker's signed final; its session is free again once its job is mined.
      await waitUntil(
        () => store.locks.holder(`sessions:busy:${sessionId}`),
        (holder) => holder === null,
        { what: `session ${sessionId} free again`, timeoutMs: 10_000 },
      );
    }
    expect(new Set(sessions).size).toBe(1);

    const concurrent = await Promise.all([
      stack.complete(wallet.address, 'together 1'),
      stack.complete(wallet.address, 'together 2'),
    ]);
    const used = concurrent.map((events) => completionOf(events)!.service!.sessionId);
    expect(new Set(used).size).toBe(2);
    expect(used).toContain(sessions[0]);
  });

  it('prefers the session that last served a conversation when it is free', async () => {
    const wallet = await stack.payingWallet();
    // Two sessions in the pool: two concurrent calls, each a different conversation.
    const [first, second] = await Promise.all([
      stack.complete(wallet.address, 'conversation a', { conversationId: 'conv-a' }),
      stack.complete(wallet.address, 'conversation b', { conversationId: 'conv-b' }),
    ]);
    const sessionA = completionOf(first!)!.service!.sessionId;
    const sessionB = completionOf(second!)!.service!.sessionId;
    expect(sessionA).not.toBe(sessionB);
    for (const round of [1, 2, 3]) {
      const b = await stack.complete(wallet.address, `b again ${round}`, { conversationId: 'conv-b' });
      expect(completionOf(b)!.service!.sessionId).toBe(sessionB);
      const a = await stack.complete(wallet.address, `a again ${round}`, { conversationId: 'conv-a' });
      expect(completionOf(a)!.service!.sessionId).toBe(sessionA);
    }
  });

  it('drops the oldest non-system messages to fit one blob and reports how many', async () => {
    const wallet = await stack.payingWallet();
    const big = 'x'.repeat(30_000);
    const messages = [
      { role: ChatRole.SYSTEM, content: 'be brief' },
      ...Array.from({ length: 6 }, (_, index) => ({
        role: index % 2 === 0 ? ChatRole.USER : ChatRole.ASSISTANT,
        content: `${index} ${big}`,
      })),
      { role: ChatRole.USER, content: 'the question' },
    ];
    const events = await stack.complete(wallet.address, messages);
    const completed = completionOf(events)!;
    // Six history messages of ~30 KB do not fit in 126,878 bytes; the system message, the last four of the
    // history and the question do: the two oldest history messages go, the system message stays.
    expect(completed.service!.droppedMessages).toBe(2);
    const kept = [messages[0]!, ...messages.slice(3)].map((message) => ({
      role:
        message.role === ChatRole.SYSTEM ? 'system' : message.role === ChatRole.USER ? 'user' : 'assistant',
      content: message.content,
    })) as Parameters<typeof deterministicAnswer>[0];
    expect(completed.text).toBe(deterministicAnswer(kept));
  });

  it('refuses context_length_exceeded when the system messages and the last turn alone do not fit', async () => {
    const wallet = await stack.payingWallet();
    const before = await stack.chain.prepaidBalanceOf(wallet.address);
    const events = await stack.complete(wallet.address, [
      { role: ChatRole.SYSTEM, content: 's'.repeat(MAX_PROMPT_PLAINTEXT_BYTES / 2) },
      { role: ChatRole.USER, content: 'u'.repeat(MAX_PROMPT_PLAINTEXT_BYTES / 2) },
    ]);
    expect(failureOf(events)).toMatchObject({
      error: { code: 'context_length_exceeded' },
      jobSubmitted: false,
    });
    expect(await stack.chain.prepaidBalanceOf(wallet.address)).toBe(before);
  });
});

describe('metrics', () => {
  it("count calls by outcome, jobs submitted on chain, first tokens and linked workers, on the runner's listener", async () => {
    const read = async (name: string, labels: Record<string, string> = {}) =>
      sampleValue(await scrape(stack.running.metricsUrl!), name, labels) ?? 0;
    const COMPLETIONS = 'svc_job_orchestrator_completions_total';
    const submitted = { method: 'submitJobFor', outcome: 'mined' };
    const runCompletion = {
      grpc_service: 'svc.orchestrator.v1.JobOrchestrator',
      grpc_method: 'RunCompletion',
      grpc_code: 'OK',
    };
    const before = {
      answered: await read(COMPLETIONS, { outcome: 'answered' }),
      refused: await read(COMPLETIONS, { outcome: 'refused', code: 'delegate_not_authorized' }),
      submitted: await read('svc_job_orchestrator_chain_transactions_total', submitted),
      firstTokens: await read('svc_job_orchestrator_time_to_first_token_seconds_count'),
      calls: await read('grpc_server_handled_total', runCompletion),
    };

    const answered = await stack.complete((await stack.payingWallet()).address, 'count me');
    expect(shapeOf(answered)).toEqual(['started', 'delta', 'completed']);
    const unauthorized = await stack.complete((await fundedWallet(devnet())).address, 'refuse me');
    expect(failureOf(unauthorized)).toMatchObject({ error: { code: 'delegate_not_authorized' } });

    expect(await read(COMPLETIONS, { outcome: 'answered' })).toBe(before.answered + 1);
    expect(await read(COMPLETIONS, { outcome: 'refused', code: 'delegate_not_authorized' })).toBe(
      before.refused + 1,
    );
    expect(await read('svc_job_orchestrator_chain_transactions_total', submitted)).toBe(before.submitted + 1);
    expect(await read('svc_job_orchestrator_time_to_first_token_seconds_count')).toBe(before.firstTokens + 1);
    expect(
      await read('svc_job_orchestrator_completion_seconds_count', { outcome: 'answered' }),
    ).toBeGreaterThan(0);
    // A refusal is an answer of the stream, not a gRPC error: both calls end OK.
    expect(await read('grpc_server_handled_total', runCompletion)).toBe(before.calls + 2);
    expect(await read('svc_job_orchestrator_linked_workers')).toBe(stack.workers.length);
    expect(await read('svc_job_orchestrator_worker_free_job_slots')).toBeGreaterThan(0);
  });
});

describe('payment checks before anything is spent', () => {
  async function expect402(wallet: string, code: string) {
    const events = await stack.complete(wallet, 'pay me');
    expect(shapeOf(events)).toEqual(['failed']);
    const failed = failureOf(events)!;
    expect(failed).toMatchObject({ error: { code }, jobSubmitted: false });
    const option = failed.error!.accepts[0]!;
    expect(option.scheme.case).toBe('delegate');
    return option.scheme.case === 'delegate' ? option.scheme.value : undefined;
  }

  it('delegate_not_authorized, with a depositAndAuthorize transaction that makes the call payable', async () => {
    const wallet = (await fundedWallet(devnet())).connect(devnet().provider);
    const option = (await expect402(wallet.address, 'delegate_not_authorized'))!;
    const registry = connectJobRegistry(devnet().deployment.jobRegistryAddress, wallet);
    expect(option).toMatchObject({
      chainId: BigInt(devnet().anvil.chainId),
      payer: { hex: wallet.address },
      delegate: { hex: stack.signer },
      instruction: {
        contract: { hex: devnet().deployment.jobRegistryAddress },
        function: 'depositAndAuthorize(address)',
        args: [stack.signer],
        minimumValueWei: { decimal: MODEL.feeWei.toString() },
      },
      transaction: {
        to: { hex: devnet().deployment.jobRegistryAddress },
        data: registry.interface.encodeFunctionData('depositAndAuthorize', [stack.signer]),
        value: { decimal: MODEL.feeWei.toString() },
        chainId: BigInt(devnet().anvil.chainId),
      },
    });
    await (
      await wallet.sendTransaction({
        to: option.transaction!.to!.hex,
        data: option.transaction!.data,
        value: BigInt(option.transaction!.value!.decimal),
      })
    ).wait();
    const events = await stack.complete(wallet.address, 'pay me');
    expect(shapeOf(events)).toEqual(['started', 'delta', 'completed']);
    expect(await stack.chain.prepaidBalanceOf(wallet.address)).toBe(0n);
  });

  it('insufficient_balance when the balance is short, asking for the difference', async () => {
    const wallet = await stack.payingWallet(MODEL.feeWei);
    const registry = connectJobRegistry(devnet().deployment.jobRegistryAddress, wallet);
    // A withdrawal request leaves prepaidBalanceOf at once (it is paid out only after SPEND_CUT_DELAY).
    await (await registry.requestWithdrawal(MODEL.feeWei / 4n)).wait();
    const option = (await expect402(wallet.address, 'insufficient_balance'))!;
    expect(option.instruction?.minimumValueWei?.decimal).toBe((MODEL.feeWei / 4n).toString());
  });

  it('allowance_exhausted when the signer may spend less than the fee', async () => {
    const wallet = await stack.payingWallet(parseEther('1'));
    const registry = connectJobRegistry(devnet().deployment.jobRegistryAddress, wallet);
    await (await registry.setDelegateAllowance(stack.signer, 1n)).wait();
    const option = (await expect402(wallet.address, 'allowance_exhausted'))!;
    expect(option.instruction?.minimumValueWei?.decimal).toBe((MODEL.feeWei - 1n).toString());
  });

  it('model_not_found for a model JobRegistry does not configure, and invalid_request for a bad payment', async () => {
    const wallet = await stack.payingWallet();
    expect(failureOf(await stack.complete(wallet.address, 'hi', { model: 'no-such-model' }))).toMatchObject({
      error: { code: 'model_not_found' },
      jobSubmitted: false,
    });
    expect(
      failureOf(await stack.complete(wallet.address, 'hi', { conversationId: 'c'.repeat(65) })),
    ).toMatchObject({ error: { code: 'invalid_request' }, jobSubmitted: false });
  });
});

describe('ListModels and QuoteFee', () => {
  it('lists the configured models a live worker serves, and quotes the chain fee', async () => {
    expect((await stack.client.listModels({})).models.map((model) => model.id)).toEqual([MODEL.name]);
    expect((await stack.client.quoteFee({ model: MODEL.name })).feeWei?.decimal).toBe(
      MODEL.feeWei.toString(),
    );
    await expect(stack.client.quoteFee({ model: 'nope' })).rejects.toMatchObject({
      status: 5,
      appCode: 'model_not_found',
    });
  });
});

describe('DescribeChain', () => {
  it('names the chain id, JobRegistry and the service signer as the delegate, checksummed', async () => {
    expect(await stack.client.describeChain({})).toMatchObject({
      chainId: BigInt(devnet().anvil.chainId),
      jobRegistry: { hex: getAddress(devnet().deployment.jobRegistryAddress) },
      delegate: { hex: getAddress(stack.signer) },
    });
  });
});

describe('refusals before anything is spent', () => {
  it('a caller that leaves before the job is submitted: failed, not submitted, nothing spent', async () => {
    const wallet = await stack.payingWallet();
    const before = await stack.chain.prepaidBalanceOf(wallet.address);
    // Every call runs in the service's sessions: with none waiting in the pool, this one opens its own.
    await stack.closePooledSessions();
    const controller = new AbortController();
    // Leaves while its new session is being opened and claimed.
    const responses = stack.client.runCompletion(
      completionRequest(wallet.address, 'bye', 'reservation-leaver'),
      {
        signal: controller.signal,
      },
    );
    const reading = (async () => {
      for await (const response of responses) void response;
    })().catch(() => undefined);
    await waitUntil(
      async () => stack.events.filter((event) => event.reservationId === 'reservation-leaver'),
      (events) => events.some((event) => event.kind === JobLifecycleKind.SESSION_OPENED),
      { what: 'the session opened for the leaving call', timeoutMs: 10_000 },
    );
    controller.abort();
    await reading;
    await waitUntil(
      async () =>
        stack.events
          .filter((event) => event.reservationId === 'reservation-leaver')
          .map((event) => event.kind),
      (kinds) => kinds.includes(JobLifecycleKind.FAILED),
      { what: 'the leaving call failed', timeoutMs: 10_000 },
    );
    const kinds = stack.events
      .filter((event) => event.reservationId === 'reservation-leaver')
      .map((event) => event.kind);
    expect(kinds).not.toContain(JobLifecycleKind.SUBMITTED);
    expect(await stack.chain.prepaidBalanceOf(wallet.address)).toBe(before);
    // The session it opened was claimed and went back to the pool: the wallet's next call uses it.
    const opened = stack.events.find(
      (event) =>
        event.reservationId === 'reservation-leaver' && event.kind === JobLifecycleKind.SESSION_OPENED,
    )!;
    const next = completionOf(await stack.complete(wallet.address, 'back again'))!;
    expect(next.service!.sessionId).toBe(opened.sessionId);
  });

  it('not_configured while JobRegistry is paused, and served again the moment it is unpaused', async () => {
    const wallet = await stack.payingWallet();
    const registry = connectJobRegistry(devnet().deployment.jobRegistryAddress, devnet().wallet(0));
    await (await registry.pause()).wait();
    try {
      // An unpaused JobRegistry is remembered for CHAIN_CACHE_TTL (5 s by default).
      await waitUntil(
        async () => failureOf(await stack.complete(wallet.address, 'paused?')),
        (failure) => failure?.error?.code === 'not_configured',
        { what: 'not_configured while paused', timeoutMs: 10_000, intervalMs: 500 },
      );
    } finally {
      await (await registry.unpause()).wait();
    }
    // A pause is not remembered: the next call reads the flag again.
    expect(completionOf(await stack.complete(wallet.address, 'unpaused?'))).toBeDefined();
  });

  it('not_configured when completions are switched off in config', async () => {
    const off = await startCompletionStack(devnet(), { store, env: { COMPLETIONS_ENABLED: 'false' } });
    try {
      const wallet = await stack.payingWallet();
      expect(failureOf(await off.complete(wallet.address, 'anyone?'))).toMatchObject({
        error: { code: 'not_configured' },
        jobSubmitted: false,
      });
    } finally {
      await off.stop();
    }
  });

  it('blob_fee_too_high when the blob base fee is above the maximum, before anything is signed', async () => {
    // A second replica on the same store whose maximum is below anvil's blob base fee (1 wei). anvil's
    // blob base fee cannot be raised (it does not track excess blob gas), so the maximum is lowered instead.
    const dear = await startCompletionStack(devnet(), { store, env: { MAX_FEE_PER_BLOB_GAS: '0' } });
    try {
      const wallet = await stack.payingWallet();
      expect(completionOf(await stack.complete(wallet.address, 'open my session'))).toBeDefined();
      const before = await stack.chain.prepaidBalanceOf(wallet.address);
      const operatorNonces = await Promise.all(
        SERVICE_ACCOUNTS.blobOperators.map((index) =>
          devnet().provider.getTransactionCount(devnet().wallet(index).address, 'pending'),
        ),
      );
      const refused = failureOf(await dear.complete(wallet.address, 'too dear'));
      expect(refused).toMatchObject({ error: { code: 'blob_fee_too_high' }, jobSubmitted: false });
      expect(await stack.chain.prepaidBalanceOf(wallet.address)).toBe(before);
      expect(
        await Promise.all(
          SERVICE_ACCOUNTS.blobOperators.map((index) =>
            devnet().provider.getTransactionCount(devnet().wallet(index).address, 'pending'),
          ),
        ),
      ).toEqual(operatorNonces);
    } finally {
      await dear.stop();
    }
  });
  // Last: it uses up the minute's session opens.
  it('session_open_limit_exceeded with retry_after once the server-wide opens of the minute are used', async () => {
    const first = await stack.payingWallet();
    const sessionBefore = completionOf(await stack.complete(first.address, 'keep my session'))!.service!
      .sessionId;
    // Every open of this minute taken (SESSION_OPENS_PER_MINUTE is 1000 in these tests).
    while ((await store.rateWindows.hit('sessions:opens', 1000, 60_000)).allowed);
    // A call that finds a session waiting in the service's pool is not held back, a new wallet's included.
    const newcomer = await stack.payingWallet();
    const served = completionOf(await stack.complete(newcomer.address, 'still served'))!;
    expect(served.service!.sessionId).toBe(sessionBefore);
    // With none waiting, a call would need a new session: refused until the window moves on.
    await stack.closePooledSessions();
    const refused = failureOf(await stack.complete(newcomer.address, 'a new session please'));
    expect(refused).toMatchObject({ error: { code: 'session_open_limit_exceeded' }, jobSubmitted: false });
    expect(refused!.error!.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(refused!.error!.retryAfterSeconds).toBeLessThanOrEqual(60);
  });
});
