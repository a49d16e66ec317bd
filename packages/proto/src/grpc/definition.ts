import {
  create,
  fromBinary,
  toBinary,
  type DescMessage,
  type DescMethod,
  type DescService,
} from '@bufbuild/protobuf';
import type { MethodDefinition, ServiceDefinition } from '@grpc/grpc-js';

/** The gRPC path of a method: `/package.Service/Method`. */
export function methodPath(method: DescMethod): string {
  return `/${method.parent.typeName}/${method.name}`;
}

function serializerOf(schema: DescMessage): (value: object) => Buffer {
  return (value) => {
    const message = create(schema, value as never);
    const bytes = toBinary(schema, message);
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
}

function deserializerOf(schema: DescMessage): (bytes: Buffer) => object {
  return (bytes) => fromBinary(schema, bytes);
}

/**
 * The @grpc/grpc-js service definition for a protobuf-es service descriptor. protobuf-es v2 emits
 * descriptors only, so the definition is derived here: same paths and binary encoding as any other
 * gRPC implementation of the same .proto.
 */
export function grpcServiceDefinition(service: DescService): ServiceDefinition {
  const definition: Record<string, MethodDefinition<object, object>> = {};
  for (const method of service.methods) {
    definition[method.localName] = {
      path: methodPath(method),
      requestStream: method.methodKind === 'client_streaming' || method.methodKind === 'bidi_streaming',
      responseStream: method.methodKind === 'server_streaming' || method.methodKind === 'bidi_streaming',
      requestSerialize: serializerOf(method.input),
      requestDeserialize: deserializerOf(method.input),
      responseSerialize: serializerOf(method.output),
      responseDeserialize: deserializerOf(method.output),
      originalName: method.name,
    };
  }
  return definition as ServiceDefinition;
}
