import { describe, expect, it } from '@jest/globals';
import { API_ERRORS, apiErrorBody, errorHeaders, streamErrorEvent, v1ErrorBody } from '@svc/api';
import { GrpcStatus, RpcError } from '@svc/proto';
import { AppError, appErrorFromRpc, appErrorToRpc, GRPC_STATUS_OF_ERROR } from '../src/index.js';

// The catalogue itself is @svc/api's (checked against docs/api.md there); here, the AppError that carries
// one of its errors: rendered by @svc/api's wire shapes, and across gRPC.

describe('an AppError in the wire shapes of @svc/api', () => {
  it('renders the OpenAI shape on /v1 with extra fields inside error', () => {
    const error = new AppError('spend_cap_exceeded', { fields: { spend_cap_wei: '1000' } });
    expect(v1ErrorBody(error)).toEqual({
      error: {
        message: API_ERRORS.spend_cap_exceeded.message,
        type: 'payment_required',
        param: null,
        code: 'spend_cap_exceeded',
        spend_cap_wei: '1000',
      },
    });
    expect(
      v1ErrorBody(new AppError('invalid_request', { message: 'messages is required' })).error.code,
    ).toBeNull();
  });

  it('renders { error, message } on /api', () => {
    expect(apiErrorBody(new AppError('api_key_active'))).toEqual({
      error: 'api_key_active',
      message: 'The key is active; revoke it first.',
    });
  });

  it('renders the stream error event with its code', () => {
    expect(streamErrorEvent(new AppError('stream_diverged')).error.code).toBe('stream_diverged');
    expect(streamErrorEvent(new AppError('job_failed')).error.code).toBe('job_failed');
  });

  it('puts retry-after on errors that carry a wait, rounded up to whole seconds', () => {
    expect(errorHeaders(new AppError('rate_limit_exceeded', { retryAfterSeconds: 2.2 }))).toEqual({
      'retry-after': '3',
    });
    expect(errorHeaders(new AppError('rate_limit_exceeded', { retryAfterSeconds: 0.01 }))).toEqual({
      'retry-after': '1',
    });
    expect(errorHeaders(new AppError('job_failed'))).toEqual({});
  });
});

describe('AppError across gRPC', () => {
  it('round-trips code, message, fields, retry-after and headers', () => {
    const original = new AppError('delegate_not_authorized', {
      message: 'authorize the signer',
      fields: { accepts: [{ scheme: 'delegate', chain_id: 31337 }] },
      retryAfterSeconds: 5,
      headers: { 'PAYMENT-REQUIRED': 'e30=' },
    });
    const rpc = appErrorToRpc(original);
    expect(rpc.status).toBe(GrpcStatus.FAILED_PRECONDITION);
    // Through metadata as the adapter sends it.
    const wire = RpcError.fromServiceError({
      code: rpc.status,
      details: rpc.message,
      metadata: rpc.toMetadata(),
    });
    const rebuilt = appErrorFromRpc(wire);
    expect(rebuilt.code).toBe('delegate_not_authorized');
    expect(rebuilt.message).toBe('authorize the signer');
    expect(rebuilt.fields).toEqual(original.fields);
    expect(rebuilt.retryAfterSeconds).toBe(5);
    expect(rebuilt.headers).toEqual({ 'PAYMENT-REQUIRED': 'e30=' });
  });

  it('crosses with the gRPC status of its error: every catalogue error has one', () => {
    expect(Object.keys(GRPC_STATUS_OF_ERROR).sort()).toEqual(Object.keys(API_ERRORS).sort());
    expect(appErrorToRpc(new AppError('invalid_payload')).status).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(appErrorToRpc(new AppError('invalid_api_key')).status).toBe(GrpcStatus.UNAUTHENTICATED);
    expect(appErrorToRpc(new AppError('model_not_found')).status).toBe(GrpcStatus.NOT_FOUND);
    expect(appErrorToRpc(new AppError('rate_limit_exceeded')).status).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
    expect(appErrorToRpc(new AppError('job_failed')).status).toBe(GrpcStatus.ABORTED);
    expect(appErrorToRpc(new AppError('stream_diverged')).status).toBe(GrpcStatus.DATA_LOSS);
    expect(appErrorToRpc(new AppError('not_configured')).status).toBe(GrpcStatus.UNAVAILABLE);
  });

  it('turns transport failures and unknown codes into internal', () => {
    expect(appErrorFromRpc(new RpcError(GrpcStatus.UNAVAILABLE, 'connection refused')).code).toBe('internal');
    expect(appErrorFromRpc(new RpcError(GrpcStatus.INTERNAL, 'x', 'not_a_code')).code).toBe('internal');
    expect(appErrorFromRpc(new Error('boom')).code).toBe('internal');
  });
});
