import { isAppError, type AppError } from '@svc/platform';
import type { RunCompletionRequest } from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import { DelegatePath, type DelegatePathDependencies } from './delegate-path.js';
import type { PaymentPath } from './payment-path.js';
import { PerCallPath, type PerCallPathDependencies } from './per-call-path.js';
import { invalidRequest } from './request-fields.js';

export type PaymentPathsDependencies = DelegatePathDependencies & Omit<PerCallPathDependencies, 'principal'>;

/**
 * Picks a call's payment path from the request's `payment` case, once, where the gRPC request is read. A
 * new payment scheme is one proto case and one `PaymentPath` module, added here.
 */
export class PaymentPaths {
  constructor(private readonly deps: PaymentPathsDependencies) {}

  forRequest(
    request: Pick<RunCompletionRequest, 'payment' | 'model'>,
    requestId: string,
  ): PaymentPath | AppError {
    const call = { requestId, model: request.model };
    const { payment } = request;
    switch (payment.case) {
      case 'delegate': {
        const terms = DelegatePath.termsOf(payment.value);
        return isAppError(terms) ? terms : new DelegatePath(this.deps, terms, call);
      }
      case 'prepaidDebit': {
        const terms = PerCallPath.termsOf(payment.value);
        if (isAppError(terms)) return terms;
        return new PerCallPath({ ...this.deps, principal: this.deps.chain.principal }, terms, call);
      }
      default:
        return invalidRequest('a completion needs a payment');
    }
  }
}
