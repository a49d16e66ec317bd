// The gRPC adapter. Generated contracts are imported from their own modules: `@svc/proto/gen/svc/<area>/v1/<file>_pb`.
export * from './grpc/index.js';
