// An internal caller of the deploying team that calls the gRPC APIs directly (docs/proto.md, "Internal
// callers"): it signs a service token per service with its own Ed25519 key, and runs a completion paid by
// one of the team's svc_ API keys the way the gateway does: ResolveKey, QuoteFee, ReserveSpend,
// RunCompletion, then CommitSpend (or ReleaseSpend when no job was submitted). The deployment grants it
// exactly those methods (SERVICE_TOKEN_INTERNAL_CALLERS, the chart's serviceTokens.internalCallers).
//
// Dependencies: `@grpc/grpc-js` with code generated from proto/ (here `@svc/proto`'s), and `jose`.
import { randomUUID, createPrivateKey, createPublicKey, createHash, type KeyObject } from 'node:crypto';
import { SignJWT } from 'jose';
import { closeClient, createClient } from '@svc/proto';
import { ChatRole } from '@svc/proto/gen/svc/common/v1/chat_pb';
import { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import { JobOrchestrator } from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';

export interface InternalCallerOptions {
  /** The caller's name, as the deployment grants it methods (the tokens' `iss`). */
  readonly name: string;
  /** Its Ed25519 private key, PKCS#8 PEM (`openssl genpkey -algorithm ed25519`). */
  readonly privateKeyPem: string;
  /** `host:port` of the key-service's and the job-orchestrator's gRPC Services. */
  readonly keyService: string;
  readonly jobOrchestrator: string;
}

type Audience = 'key-service' | 'job-orchestrator';

/**
 * Service tokens of one caller: a JWT per service called (EdDSA; `typ` svc-service+jwt; `kid` the first
 * 16 characters of the base64url SHA-256 of the public key's SPKI DER; `iss` the caller, `aud` the
 * service, a one-minute `exp`), kept until 30 s of it are left.
 */
export class ServiceTokens {
  readonly #key: KeyObject;
  readonly #kid: string;
  readonly #kept = new Map<Audience, { readonly token: Promise<string>; readonly renewAt: number }>();

  constructor(
    private readonly name: string,
    privateKeyPem: string,
  ) {
    this.#key = createPrivateKey(privateKeyPem);
    const spki = createPublicKey(this.#key).export({ type: 'spki', format: 'der' });
    this.#kid = createHash('sha256').update(spki).digest('base64url').slice(0, 16);
  }

  /** The call metadata that authenticates a call to `audience`. */
  async metadata(audience: Audience): Promise<Record<string, string>> {
    let kept = this.#kept.get(audience);
    if (kept === undefined || Date.now() >= kept.renewAt) {
      const token = new SignJWT({})
        .setProtectedHeader({ alg: 'EdDSA', typ: 'svc-service+jwt', kid: this.#kid })
        .setIssuer(this.name)
        .setAudience(audience)
        .setIssuedAt()
        .setExpirationTime('60s')
        .sign(this.#key);
      kept = { token, renewAt: Date.now() + 30_000 };
      this.#kept.set(audience, kept);
    }
    return { authorization: `Bearer ${await kept.token}` };
  }
}

export interface Completion {
  readonly text: string;
  readonly chargedWei: bigint;
}

/** The key-service and job-orchestrator clients of an internal caller. */
export function connectInternalCaller(options: InternalCallerOptions) {
  const tokens = new ServiceTokens(options.name, options.privateKeyPem);
  const keyService = createClient(KeyService, options.keyService, { defaultUnaryTimeoutMs: 10_000 });
  const orchestrator = createClient(JobOrchestrator, options.jobOrchestrator, {
    defaultUnaryTimeoutMs: 10_000,
  });

  return {
    keyService,
    orchestrator,
    tokens,

    /** One completion of `model` for `prompt`, paid by the wallet behind `apiKey` within its spend cap. */
    async complete(apiKey: string, model: string, prompt: string): Promise<Completion> {
      const requestId = randomUUID();
      const asKeyService = { metadata: await tokens.metadata('key-service'), requestId };
      const asOrchestrator = { metadata: await tokens.metadata('job-orchestrator'), requestId };
      const key = await keyService.resolveKey({ presentedKey: apiKey }, asKeyService);
      const { feeWei } = await orchestrator.quoteFee({ model }, asOrchestrator);
      const reserved = await keyService.reserveSpend(
        { keyId: key.keyId, amountWei: feeWei, ttl: { seconds: 600n }, requestId },
        asKeyService,
      );
      if (reserved.outcome.case !== 'reserved')
        throw new Error('the key has no room for this call under its spend cap');
      const { reservationId } = reserved.outcome.value;
      const events = orchestrator.runCompletion(
        {
          requestId,
          model,
          messages: [{ role: ChatRole.USER, content: prompt }],
          stream: false,
          payment: {
            case: 'delegate',
            value: { wallet: key.wallet, keyId: key.keyId, reservationId, maxFeeWei: feeWei },
          },
        },
        asOrchestrator,
      );
      for await (const { event } of events) {
        if (event.case === 'completed') {
          const chargedWei = BigInt(event.value.chargedWei?.decimal ?? '0');
          await keyService.commitSpend(
            { reservationId, chargedWei: event.value.chargedWei },
            { ...asKeyService, metadata: await tokens.metadata('key-service') },
          );
          return { text: event.value.text, chargedWei };
        }
        if (event.case === 'failed') {
          // Only a call the orchestrator knows submitted no job gives its hold back; the others are settled
          // by the job's lifecycle events.
          if (!event.value.jobSubmitted)
            await keyService.releaseSpend(
              { reservationId },
              { ...asKeyService, metadata: await tokens.metadata('key-service') },
            );
          throw new Error(`the completion failed: ${event.value.error?.code ?? 'unknown'}`);
        }
      }
      throw new Error('the completion ended without an outcome');
    },

    close(): void {
      closeClient(keyService);
      closeClient(orchestrator);
    },
  };
}
