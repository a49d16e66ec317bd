import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';

const HealthClient = grpc.makeGenericClientConstructor(healthService, 'grpc.health.v1.Health');

/** What grpc.health.v1 `Check` answers for `service` at `address` (`SERVING`, …), as a probe asks. */
export async function healthStatus(address: string, service: string): Promise<string> {
  const client = new HealthClient(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
    check(
      request: { service: string },
      callback: (error: grpc.ServiceError | null, response?: { status: string }) => void,
    ): void;
  };
  try {
    return await new Promise<string>((resolve, reject) =>
      client.check({ service }, (error, response) =>
        error ? reject(error) : resolve(String(response?.status)),
      ),
    );
  } finally {
    client.close();
  }
}
